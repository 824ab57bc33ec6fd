//! What the models cost in dollars: a dated table (`prices.json`, built
//! in) of USD per million input tokens for the models the four agents use
//! (plain input, a cache write that lives 5 minutes, one that lives an
//! hour, a cache read; another row above 200,000 prompt tokens where the
//! provider charges more there), and the rule that prices a request by its
//! model. `--prices FILE` gives another table in the same format.
//!
//! A model is priced by the longest name in the table it begins with, when
//! what follows is nothing, a date (`-20251101`) or a release tag
//! (`-preview`, `-latest`, `-exp`); otherwise (a model the table does not
//! know) by its provider's nearest tier (Claude's opus, sonnet or haiku;
//! OpenAI's nano, mini or the full model; Gemini's flash-lite, flash or
//! pro; the newest of that tier), and the price says so ([`Priced::note`]).

use crate::api::Api;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::OnceLock;

/// Above this many prompt tokens a model's `long` prices apply.
pub const LONG_PROMPT: u64 = 200_000;

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Plain input.
    pub input: f64,
    /// A cache write that lives 5 minutes.
    pub write_5m: f64,
    /// A cache write that lives an hour.
    pub write_1h: f64,
    /// A cache read.
    pub read: f64,
}

impl Price {
    /// This price as multiples of its input price ([`crate::bill::Pricing`]),
    /// writes at the 1-hour price when `hour`.
    pub fn pricing(&self, hour: bool) -> crate::bill::Pricing {
        let write = if hour { self.write_1h } else { self.write_5m };
        let per = |x: f64| if self.input > 0.0 { x / self.input } else { 0.0 };
        crate::bill::Pricing { read: per(self.read), write: per(write) }
    }

    /// Dollars for `units` of input (`units`: tokens at the plain input
    /// price, the unit [`crate::bill::Bill`] counts in).
    pub fn usd(&self, units: f64) -> f64 {
        units * self.input / 1e6
    }

    fn check(&self) -> Result<(), String> {
        let all = [self.input, self.write_5m, self.write_1h, self.read];
        all.iter().all(|x| x.is_finite() && *x >= 0.0).then_some(()).ok_or_else(|| "every price must be a finite number >= 0".to_string())
    }
}

/// One model of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Its name as requests give it (a date or release tag after it still matches).
    pub model: String,
    /// `anthropic`, `openai` or `google`.
    pub provider: String,
    /// Its tier within the provider (`opus`, `sonnet`, `haiku`, `gpt`, `mini`, `nano`, `pro`, `flash`, `flash-lite`).
    pub tier: String,
    /// Its prices up to [`LONG_PROMPT`] prompt tokens ([`Entry::price`]).
    pub input: f64,
    /// See [`Price::write_5m`].
    pub write_5m: f64,
    /// See [`Price::write_1h`].
    pub write_1h: f64,
    /// See [`Price::read`].
    pub read: f64,
    /// Prices above [`LONG_PROMPT`] prompt tokens, where they differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long: Option<Price>,
}

impl Entry {
    /// Its prices up to [`LONG_PROMPT`] prompt tokens.
    pub fn price(&self) -> Price {
        Price { input: self.input, write_5m: self.write_5m, write_1h: self.write_1h, read: self.read }
    }
}

/// A price table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    /// When the prices were read.
    pub date: String,
    /// Where they come from, and what they mean.
    #[serde(default)]
    pub about: String,
    /// The models, newest of each tier first (the nearest tier's price is the first of it).
    pub models: Vec<Entry>,
}

/// How a model was priced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Match {
    /// By its name in the table.
    Exact,
    /// By its provider's nearest tier: the table does not know it.
    Nearest,
}

/// A request's model priced: the entry, and how it was found.
#[derive(Debug, Clone, PartialEq)]
pub struct Priced<'p> {
    /// The table's entry it is priced by.
    pub entry: &'p Entry,
    /// The model the request named (`None`: it named none).
    pub asked: Option<String>,
    /// Whether the table knows it, or its nearest tier stands in.
    pub how: Match,
}

impl Priced<'_> {
    /// The prices for a request of `prompt` tokens.
    pub fn price(&self, prompt: u64) -> Price {
        match self.entry.long {
            Some(long) if prompt > LONG_PROMPT => long,
            _ => self.entry.price(),
        }
    }

    /// What a reader is told when the model was not in the table (or not named).
    pub fn note(&self, date: &str) -> Option<String> {
        (self.how == Match::Nearest).then(|| {
            let asked = self.asked.as_deref().unwrap_or("(no model named)");
            format!("{asked}: not in the price table of {date}; priced as {}, the nearest {} tier", self.entry.model, self.entry.tier)
        })
    }
}

impl Prices {
    /// The table built in (`prices.json`).
    pub fn builtin() -> &'static Prices {
        static TABLE: OnceLock<Prices> = OnceLock::new();
        TABLE.get_or_init(|| {
            Prices::parse(include_str!("prices.json")).unwrap_or_else(|e| unreachable!("the built-in price table is checked by its tests: {e}"))
        })
    }

    /// A table from `path` (`--prices FILE`), in the built-in's format; an
    /// error names the file and what is wrong (its line and column for JSON).
    pub fn read(path: &Path) -> Result<Prices, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("--prices {}: {e}", path.display()))?;
        Prices::parse(&text).map_err(|e| format!("--prices {}: {e}", path.display()))
    }

    fn parse(text: &str) -> Result<Prices, String> {
        let p: Prices = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if p.models.is_empty() {
            return Err("no model in `models`".into());
        }
        for (i, e) in p.models.iter().enumerate() {
            let bad = |why: String| format!("models[{i}] ({}): {why}", e.model);
            e.price().check().map_err(bad)?;
            e.long.map_or(Ok(()), |l| l.check()).map_err(bad)?;
            if !["anthropic", "openai", "google"].contains(&e.provider.as_str()) {
                return Err(bad(format!("provider `{}`: expected anthropic, openai or google", e.provider)));
            }
            if p.models[..i].iter().any(|o| o.model == e.model) {
                return Err(bad("named twice".into()));
            }
        }
        Ok(p)
    }

    /// The price of `model` (as a request names it), sent on `api`.
    pub fn price(&self, model: Option<&str>, api: Api) -> Priced<'_> {
        let asked = model.map(str::to_string);
        let name = model.map(normalized).unwrap_or_default();
        let exact = self.models.iter().filter(|e| name.starts_with(&e.model) && only_a_tag(&name[e.model.len()..])).max_by_key(|e| e.model.len());
        if let Some(entry) = exact {
            return Priced { entry, asked, how: Match::Exact };
        }
        let provider = self.provider_of(&name).unwrap_or(match api {
            Api::Messages => "anthropic",
            Api::Gemini => "google",
            Api::ChatCompletions | Api::Responses => "openai",
        });
        let tier = tier_of(provider, &name);
        let of = |t: &str| self.models.iter().find(|e| e.provider == provider && e.tier == t);
        let entry = of(tier).or_else(|| self.models.iter().find(|e| e.provider == provider)).unwrap_or(&self.models[0]);
        Priced { entry, asked, how: Match::Nearest }
    }
}

/// A model's name as the table writes them: lower case, without a
/// provider's path (`models/`, `anthropic/`, `openai/`, `google/`).
fn normalized(model: &str) -> String {
    let m = model.trim().to_ascii_lowercase();
    m.rsplit('/').next().unwrap_or(&m).to_string()
}

/// Whether what follows a table name in a model's name is nothing, a date
/// or a release tag (so the model is that entry).
fn only_a_tag(rest: &str) -> bool {
    let Some(tag) = rest.strip_prefix('-').or_else(|| rest.strip_prefix('@')) else { return rest.is_empty() };
    let date = tag.chars().all(|c| c.is_ascii_digit() || c == '-') && tag.chars().filter(char::is_ascii_digit).count() >= 6;
    date || ["preview", "latest", "exp"].iter().any(|t| tag.starts_with(t))
}

impl Prices {
    /// The provider of a model the table does not know: that of the
    /// table's models whose names begin with the same word (the part
    /// before the first `-`).
    fn provider_of(&self, name: &str) -> Option<&'static str> {
        let word = |n: &str| n.split('-').next().unwrap_or_default().to_string();
        let e = self.models.iter().find(|e| word(&e.model) == word(name) && !name.is_empty())?;
        ["anthropic", "openai", "google"].into_iter().find(|p| *p == e.provider)
    }
}

/// A provider's tier a model's name says, else its middle one.
fn tier_of(provider: &str, name: &str) -> &'static str {
    let tiers: &[&'static str] = match provider {
        "anthropic" => &["opus", "haiku", "sonnet"],
        "google" => &["flash-lite", "flash", "pro"],
        _ => &["nano", "mini", "gpt"],
    };
    tiers.iter().copied().find(|t| name.contains(t)).unwrap_or(tiers[tiers.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_table_reads_and_prices_the_agents_models() {
        let p = Prices::builtin();
        assert_eq!(p.date, "2026-12-07");
        let by = |m: &str, api| {
            let x = p.price(Some(m), api);
            (x.entry.model.clone(), x.how)
        };
        assert_eq!(by("claude-opus-4-5-20251101", Api::Messages), ("claude-opus-4-5".into(), Match::Exact));
        assert_eq!(by("claude-sonnet-4-5", Api::Messages), ("claude-sonnet-4-5".into(), Match::Exact));
        assert_eq!(by("claude-sonnet-4-20250514", Api::Messages), ("claude-sonnet-4".into(), Match::Exact));
        assert_eq!(by("gpt-5-codex", Api::Responses), ("gpt-5-codex".into(), Match::Exact));
        assert_eq!(by("gpt-5.1-codex-max", Api::Responses).1, Match::Nearest, "a suffix that is no date or release tag");
        assert_eq!(by("models/gemini-3.1-pro-preview", Api::Gemini), ("gemini-3.1-pro".into(), Match::Exact));
        assert_eq!(by("gemini-2.5-flash-lite", Api::Gemini), ("gemini-2.5-flash-lite".into(), Match::Exact));
        let s = p.price(Some("claude-sonnet-4-5"), Api::Messages);
        assert_eq!((s.price(1000).input, s.price(250_000).input), (3.0, 6.0), "above 200,000 prompt tokens: the long price");
        let a = s.price(1000).pricing(false);
        assert!((a.write - 1.25).abs() < 1e-9 && (a.read - 0.1).abs() < 1e-9, "{a:?}");
        assert!((s.price(1000).pricing(true).write - 2.0).abs() < 1e-9);
        assert!((s.price(1000).usd(1_000_000.0) - 3.0).abs() < 1e-9);
    }

    /// A model the table does not know: its provider's nearest tier, named.
    #[test]
    fn an_unknown_model_takes_its_provider_s_nearest_tier_and_says_so() {
        let p = Prices::builtin();
        let x = p.price(Some("claude-haiku-9"), Api::Messages);
        assert_eq!((x.entry.model.as_str(), x.how), ("claude-haiku-4-5", Match::Nearest));
        assert_eq!(x.note(&p.date).unwrap(), "claude-haiku-9: not in the price table of 2026-12-07; priced as claude-haiku-4-5, the nearest haiku tier");
        assert_eq!(p.price(Some("gpt-7-mini"), Api::Responses).entry.model, "gpt-5.4-mini");
        assert_eq!(p.price(Some("gemini-9-flash"), Api::Gemini).entry.model, "gemini-3.5-flash");
        assert_eq!(p.price(Some("my-local-model"), Api::ChatCompletions).entry.tier, "gpt", "no provider in the name: the API's");
        assert_eq!(p.price(None, Api::Gemini).entry.provider, "google");
        assert!(p.price(Some("claude-opus-4-6"), Api::Messages).note(&p.date).is_none());
    }

    #[test]
    fn a_bad_table_is_an_error_naming_what_is_wrong() {
        let one = |e: &str| format!(r#"{{"date":"d","models":[{e}]}}"#);
        let ok = r#"{"model":"m","provider":"openai","tier":"gpt","input":1,"write_5m":1,"write_1h":1,"read":0.1}"#;
        assert!(Prices::parse(&one(ok)).is_ok());
        for (bad, says) in [
            (one(&ok.replace("\"read\":0.1", "\"read\":-1")), "models[0] (m): every price"),
            (one(&ok.replace("openai", "acme")), "provider `acme`"),
            (one(&format!("{ok},{ok}")), "named twice"),
            (r#"{"date":"d","models":[]}"#.to_string(), "no model"),
            ("{\"date\":\"d\",\n\"models\": [x]}".to_string(), "line 2"),
            (one(&ok.replace("\"read\":0.1", "\"read\":0.1,\"reed\":1")), "unknown field `reed`"),
        ] {
            let e = Prices::parse(&bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let dir = tempfile::tempdir().unwrap();
        let e = Prices::read(&dir.path().join("missing.json")).unwrap_err();
        assert!(e.starts_with("--prices ") && e.contains("missing.json"), "{e}");
    }
}
