//! Codec names: the one parser for what the CLI, xtask and reports call a
//! codec, and the canonical name a [`Codec`] prints as.
//!
//! Grammar (case-sensitive):
//!
//! ```text
//! f16 | int8 | binary
//! szp[-fixed|-plain][-rel<BOUND>|-abs<BOUND>]      BOUND: a float, e.g. 1e-3, 0.01
//! ```
//!
//! `szp` alone is fixed mode at `rel 1e-3` (the CLI's `--codec szp`);
//! `szp-plain` is plain mode at `rel 1e-3`. `Display` writes the full form
//! (`szp-fixed-rel1e-3`), which parses back to the same codec.

use crate::{Bound, Codec, Error, SzpMode};
use std::fmt;
use std::str::FromStr;

/// The bound `szp` gets when its name carries none.
pub const DEFAULT_SZP_BOUND: Bound = Bound::Rel(1e-3);

const EXPECTED: &str = "f16, int8, binary, or szp[-fixed|-plain][-rel<B>|-abs<B>] (e.g. szp, szp-plain, szp-fixed-rel1e-2)";

/// Parse a codec name (see the module docs); same as `name.parse::<Codec>()`.
pub fn parse_codec(name: &str) -> Result<Codec, Error> {
    let unknown = || Error::UnknownCodec { name: name.to_string(), expected: EXPECTED };
    match name {
        "f16" => return Ok(Codec::F16),
        "int8" => return Ok(Codec::Int8PerVector),
        "binary" => return Ok(Codec::SignBinary),
        _ => {}
    }
    let rest = name.strip_prefix("szp").ok_or_else(unknown)?;
    let (mode, rest) = if let Some(r) = rest.strip_prefix("-fixed") {
        (SzpMode::Fixed, r)
    } else if let Some(r) = rest.strip_prefix("-plain") {
        (SzpMode::Plain, r)
    } else {
        (SzpMode::Fixed, rest)
    };
    let bound = if rest.is_empty() {
        DEFAULT_SZP_BOUND
    } else if let Some(b) = rest.strip_prefix("-rel") {
        Bound::Rel(bound_value(b).ok_or_else(unknown)?)
    } else if let Some(b) = rest.strip_prefix("-abs") {
        Bound::Abs(bound_value(b).ok_or_else(unknown)?)
    } else {
        return Err(unknown());
    };
    Ok(Codec::Szp { mode, bound })
}

/// A bound's number: finite and >= 0 (the codec checks the rest when encoding).
fn bound_value(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0)
}

impl FromStr for Codec {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        parse_codec(s)
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Codec::Szp { mode, bound } => {
                let (kind, v) = match bound {
                    Bound::Rel(v) => ("rel", v),
                    Bound::Abs(v) => ("abs", v),
                };
                write!(f, "szp-{}-{kind}{v:e}", mode.name())
            }
            other => f.write_str(other.id().name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_the_cli_and_xtask_use_parses() {
        let szp = |mode, bound| Codec::Szp { mode, bound };
        let cases = [
            ("f16", Codec::F16),
            ("int8", Codec::Int8PerVector),
            ("binary", Codec::SignBinary),
            ("szp", szp(SzpMode::Fixed, Bound::Rel(1e-3))),
            ("szp-plain", szp(SzpMode::Plain, Bound::Rel(1e-3))),
            ("szp-fixed", szp(SzpMode::Fixed, Bound::Rel(1e-3))),
            ("szp-fixed-rel1e-2", szp(SzpMode::Fixed, Bound::Rel(1e-2))),
            ("szp-plain-rel1e-3", szp(SzpMode::Plain, Bound::Rel(1e-3))),
            ("szp-plain-abs0.001", szp(SzpMode::Plain, Bound::Abs(0.001))),
            ("szp-abs2.5e-4", szp(SzpMode::Fixed, Bound::Abs(2.5e-4))),
        ];
        for (name, want) in cases {
            assert_eq!(parse_codec(name).unwrap(), want, "{name}");
            assert_eq!(name.parse::<Codec>().unwrap(), want, "{name}");
        }
    }

    #[test]
    fn display_is_canonical_and_round_trips() {
        for name in ["f16", "int8", "binary", "szp-fixed-rel1e-2", "szp-plain-rel1e-3", "szp-fixed-abs5e-4"] {
            let c = parse_codec(name).unwrap();
            assert_eq!(c.to_string(), name);
            assert_eq!(parse_codec(&c.to_string()).unwrap(), c);
        }
        assert_eq!(parse_codec("szp").unwrap().to_string(), "szp-fixed-rel1e-3");
    }

    #[test]
    fn bad_names_are_errors_that_list_the_grammar() {
        for bad in ["", "F16", "szp-", "szp-fast", "szp-rel", "szp-relx", "szp-rel-1", "szp-absNaN", "szp-relinf", "szp-plain-fixed", "int8 ", "cuszp"] {
            let e = parse_codec(bad).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, Error::UnknownCodec { .. }), "{bad}: {msg}");
            assert!(msg.contains("szp-plain") && msg.contains(&format!("`{bad}`")), "{bad}: {msg}");
        }
    }
}
