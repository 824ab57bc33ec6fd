//! Part selectors of a recall (`K` or `K/N`), as `lam recall` and `lam mcp`
//! take them; the parts themselves are cut by [`crate::cut_parts`].

/// Why a part selector was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartError {
    /// Not `K` or `K/N` with whole numbers.
    Syntax(String),
    /// `K/N` where `N` is not the observation's part count.
    Count {
        /// The selector as given.
        spec: String,
        /// The observation's part count.
        parts: usize,
        /// The `N` given.
        given: usize,
    },
    /// `K` is 0 or past the last part.
    Missing {
        /// The `K` given.
        k: usize,
        /// The observation's part count.
        parts: usize,
    },
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

impl std::fmt::Display for PartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PartError::Syntax(s) => write!(f, "part `{s}`: expected K or K/N with whole numbers"),
            PartError::Count { spec, parts, given } => {
                write!(f, "part `{spec}`: the observation has {parts} part{} at this part size, not {given}", plural(*parts))
            }
            PartError::Missing { k, parts } => write!(f, "part {k} does not exist: the observation has {parts} part{}", plural(*parts)),
        }
    }
}

impl std::error::Error for PartError {}

/// Parse `K` or `K/N` (1-based; `N`, when given, must equal `parts`) into `K`.
pub fn parse_part(s: &str, parts: usize) -> Result<usize, PartError> {
    let (k, n) = match s.split_once('/') {
        Some((k, n)) => (k, Some(n)),
        None => (s, None),
    };
    let whole = |x: &str| x.parse::<usize>().map_err(|_| PartError::Syntax(s.to_string()));
    let k = whole(k)?;
    if let Some(n) = n.map(whole).transpose()?
        && n != parts
    {
        return Err(PartError::Count { spec: s.to_string(), parts, given: n });
    }
    if k == 0 || k > parts {
        return Err(PartError::Missing { k, parts });
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_checked() {
        assert_eq!(parse_part("2", 3), Ok(2));
        assert_eq!(parse_part("2/3", 3), Ok(2));
        for bad in ["0", "4", "1/banana", "1/0", "2/4", "x", "-1", "", " 1"] {
            assert!(parse_part(bad, 3).is_err(), "{bad}");
        }
        assert_eq!(parse_part("2/4", 3).unwrap_err().to_string(), "part `2/4`: the observation has 3 parts at this part size, not 4");
        assert_eq!(parse_part("5", 1).unwrap_err().to_string(), "part 5 does not exist: the observation has 1 part");
    }
}
