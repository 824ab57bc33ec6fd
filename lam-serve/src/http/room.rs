//! Room for requests in flight: the working memory the bodies being read,
//! parsed and rewritten may hold together ([`ServeConfig::in_flight_budget`]),
//! so that `--max-memory` bounds the process and not only what sessions
//! hold. A request reserves its share before its body is read (by its
//! `content-length`; a body sent without one is read first, within
//! `--max-body-mib`), waits its turn at most
//! [`ServeConfig::queue_timeout`], and is refused with `503` when its
//! share never fits or its turn does not come.

use super::error;
use crate::config::ServeConfig;
pub(crate) use crate::config::WORK_PER_BODY_BYTE;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// One permit is a KiB (a `Semaphore` counts at most `u32` permits at once).
const UNIT: usize = 1 << 10;

/// The room shared by every request of the proxy.
#[derive(Debug, Clone)]
pub(crate) struct Room {
    free: Arc<Semaphore>,
    /// All of it, in KiB.
    total: u32,
}

/// A request's share of the room, given back when dropped.
#[derive(Debug)]
pub(crate) struct Share(OwnedSemaphorePermit);

impl Room {
    pub(crate) fn new(cfg: &ServeConfig) -> Self {
        let total = u32::try_from(cfg.in_flight_budget() / UNIT).unwrap_or(u32::MAX).max(1);
        Self { free: Arc::new(Semaphore::new(total as usize)), total }
    }

    /// Reserve the working memory of a body of `len` bytes (`factor` bytes
    /// a byte): at once, after waiting at most `cfg.queue_timeout`, or the
    /// `503` to answer.
    pub(crate) async fn reserve(&self, cfg: &ServeConfig, len: usize, factor: usize) -> Result<Share, Response> {
        let need = len.saturating_mul(factor).div_ceil(UNIT).max(1);
        let mib = |kib: usize| kib as f64 / 1024.0;
        if need > self.total as usize {
            return Err(error(
                StatusCode::SERVICE_UNAVAILABLE,
                "lam_overloaded",
                &format!(
                    "lam serve: this request needs about {:.1} MiB of working memory ({factor} x its {len}-byte body) and requests in flight may hold {:.1} MiB in all (--max-memory {} MiB); send a smaller request or start lam serve with a larger --max-memory",
                    mib(need),
                    mib(self.total as usize),
                    cfg.max_memory >> 20,
                ),
            ));
        }
        let wait = self.free.clone().acquire_many_owned(need as u32);
        match tokio::time::timeout(cfg.queue_timeout, wait).await {
            Ok(Ok(p)) => Ok(Share(p)),
            // The semaphore is never closed; the timeout is the one way out.
            Ok(Err(_)) | Err(_) => {
                let mut r = error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "lam_overloaded",
                    &format!(
                        "lam serve: waited {} s for {:.1} MiB of working memory: requests in flight hold the {:.1} MiB that --max-memory {} MiB allows them; retry later, or start lam serve with a larger --max-memory",
                        cfg.queue_timeout.as_secs_f64(),
                        mib(need),
                        mib(self.total as usize),
                        cfg.max_memory >> 20,
                    ),
                );
                r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                Err(r)
            }
        }
    }

    /// Bytes reserved now by requests in flight.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        (self.total as usize - self.free.available_permits()) * UNIT
    }
}

impl Share {
    /// Keep only what `len` bytes (the body now forwarded) need; give the rest back.
    pub(crate) fn shrink_to(&mut self, len: usize) {
        let keep = len.div_ceil(UNIT).max(1);
        if self.0.num_permits() > keep {
            drop(self.0.split(self.0.num_permits() - keep));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn shares_wait_their_turn_shrink_and_never_exceed_the_room() {
        let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
        cfg.max_memory = 1 << 20;
        cfg.queue_timeout = Duration::from_millis(50);
        let room = Room::new(&cfg);
        assert_eq!(room.total, 1024);
        let too_big = room.reserve(&cfg, 100 << 10, 16).await.unwrap_err();
        assert_eq!(too_big.status(), StatusCode::SERVICE_UNAVAILABLE);
        let mut a = room.reserve(&cfg, 40 << 10, 16).await.unwrap();
        assert_eq!(room.held(), 640 << 10);
        let late = room.reserve(&cfg, 40 << 10, 16).await.unwrap_err();
        assert_eq!(late.headers()[header::RETRY_AFTER], "1");
        a.shrink_to(40 << 10);
        assert_eq!(room.held(), 40 << 10);
        let b = room.reserve(&cfg, 40 << 10, 16).await.unwrap();
        drop((a, b));
        assert_eq!(room.held(), 0);
    }
}
