use lam_core::{Encoder, EncoderInfo, Error};
use std::collections::HashMap;
use std::ops::Range;
use xxhash_rust::xxh3::xxh3_128;

/// Memoises an encoder by the exact bytes of each chunk, so running the
/// online and batch forms, or a threshold sweep, encodes every chunk once.
/// Keys are content hashes within one model (the wrapped encoder's).
#[derive(Debug)]
pub struct CachedEncoder<E> {
    inner: E,
    dim: usize,
    memo: HashMap<u128, Box<[f32]>>,
    hits: u64,
    misses: u64,
}

impl<E: Encoder> CachedEncoder<E> {
    /// Wrap `inner`.
    pub fn new(inner: E) -> Self {
        let dim = inner.info().dim;
        Self { inner, dim, memo: HashMap::new(), hits: 0, misses: 0 }
    }

    /// (hits, misses) so far.
    pub fn stats(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }

    /// The wrapped encoder.
    pub fn inner(&self) -> &E {
        &self.inner
    }
}

impl<E: Encoder> Encoder for CachedEncoder<E> {
    fn info(&self) -> EncoderInfo {
        self.inner.info()
    }

    fn token_spans(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error> {
        self.inner.token_spans(text, out)
    }

    fn chunks(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error> {
        self.inner.chunks(text, out)
    }

    fn encode_batch(&mut self, texts: &[&[u8]], out: &mut [f32]) -> Result<(), Error> {
        let d = self.dim;
        if out.len() != texts.len() * d {
            return Err(Error::Dimension { expected: texts.len() * d, got: out.len() });
        }
        let keys: Vec<u128> = texts.iter().map(|t| xxh3_128(t)).collect();
        let mut todo: Vec<usize> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (i, k) in keys.iter().enumerate() {
            if !self.memo.contains_key(k) && seen.insert(*k) {
                todo.push(i);
            }
        }
        self.hits += (texts.len() - todo.len()) as u64;
        self.misses += todo.len() as u64;
        if !todo.is_empty() {
            let miss: Vec<&[u8]> = todo.iter().map(|&i| texts[i]).collect();
            let mut v = vec![0.0f32; miss.len() * d];
            self.inner.encode_batch(&miss, &mut v)?;
            for (&i, row) in todo.iter().zip(v.chunks_exact(d)) {
                self.memo.insert(keys[i], row.into());
            }
        }
        for (k, row) in keys.iter().zip(out.chunks_exact_mut(d)) {
            row.copy_from_slice(&self.memo[k]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HashingEncoder;

    #[test]
    fn encodes_each_chunk_once_and_returns_the_same_bits() {
        let mut plain = HashingEncoder::default();
        let mut c = CachedEncoder::new(HashingEncoder::default());
        let texts: Vec<&[u8]> = vec![b"a b c", b"d e f", b"a b c"];
        let mut a = vec![0.0; 3 * 384];
        let mut b = vec![0.0; 3 * 384];
        plain.encode_batch(&texts, &mut a).unwrap();
        c.encode_batch(&texts, &mut b).unwrap();
        assert_eq!(a, b);
        assert_eq!(c.stats(), (1, 2));
        c.encode_batch(&texts, &mut b).unwrap();
        assert_eq!(c.stats(), (4, 2));
        assert_eq!(a, b);
        lam_core::testsuite::encoder(&mut c);
    }
}
