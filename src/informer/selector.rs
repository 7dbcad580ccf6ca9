//! Label selectors in the API server's text syntax (`app=web,tier!=cache,env in (a,b),!legacy,replicas>1`), matched against cached labels.

use super::object::Meta;

/// A parsed label selector: every requirement must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector(Vec<Requirement>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
    /// apimachinery's `GreaterThan`: the label's value, read as an integer, is greater.
    GreaterThan(String, i64),
    /// apimachinery's `LessThan`: the label's value, read as an integer, is smaller.
    LessThan(String, i64),
}

impl LabelSelector {
    /// Parses the text; the error says what is wrong and where.
    pub fn parse(text: &str) -> Result<LabelSelector, String> {
        let mut requirements = Vec::new();
        for part in split_top_level(text)? {
            let part = part.trim();
            if part.is_empty() {
                if text.trim().is_empty() {
                    continue;
                }
                return Err(format!("empty requirement in {text:?}"));
            }
            requirements.push(requirement(part)?);
        }
        Ok(LabelSelector(requirements))
    }

    pub fn matches(&self, meta: &Meta) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => meta.label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => meta.label(k) != Some(v.as_str()),
            Requirement::In(k, vs) => meta.label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => meta.label(k).is_none_or(|l| vs.iter().all(|v| v != l)),
            Requirement::Exists(k) => meta.label(k).is_some(),
            Requirement::DoesNotExist(k) => meta.label(k).is_none(),
            Requirement::GreaterThan(k, bound) => integer_label(meta, k).is_some_and(|value| value > *bound),
            Requirement::LessThan(k, bound) => integer_label(meta, k).is_some_and(|value| value < *bound),
        })
    }
}

/// The label's value as apimachinery reads it for `>` and `<` (Go's
/// `strconv.ParseInt(v, 10, 64)`, which Rust's `i64` parsing agrees with,
/// signs included): an object whose value is not an integer matches neither.
fn integer_label(meta: &Meta, key: &str) -> Option<i64> {
    meta.label(key).and_then(|value| value.parse().ok())
}

/// Splits at commas outside parentheses.
fn split_top_level(text: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!("unbalanced ')' at {i} in {text:?}"));
                }
            }
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unclosed '(' in {text:?}"));
    }
    parts.push(&text[start..]);
    Ok(parts)
}

fn requirement(part: &str) -> Result<Requirement, String> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(label_key(key.trim(), part)?));
    }
    // Read as the key `a>` and `=`, these would be refused for the key.
    if let Some(op) = [">=", "<="].into_iter().find(|op| part.contains(op)) {
        return Err(format!(
            "{op:?} is not an operator of label selectors, in {part:?}: use '>' or '<' with an integer"
        ));
    }
    for (op, build) in [
        ("!=", Requirement::NotEquals as fn(String, String) -> Requirement),
        ("==", Requirement::Equals),
        ("=", Requirement::Equals),
    ] {
        if let Some((key, value)) = part.split_once(op) {
            return Ok(build(label_key(key.trim(), part)?, label_value(value.trim(), part)?));
        }
    }
    for (op, build) in [('>', Requirement::GreaterThan as fn(String, i64) -> Requirement), ('<', Requirement::LessThan)]
    {
        if let Some((key, value)) = part.split_once(op) {
            return Ok(build(label_key(key.trim(), part)?, integer_value(value.trim(), op, part)?));
        }
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if let [key, rest] = words[..] {
        let rest = rest.trim_start();
        let (op, set) = if let Some(set) = rest.strip_prefix("notin") {
            ("notin", set)
        } else if let Some(set) = rest.strip_prefix("in") {
            ("in", set)
        } else {
            return Err(format!("unknown operator in {part:?}: use =, ==, !=, >, <, in, notin, or a bare key"));
        };
        let set = set.trim();
        let inner = set
            .strip_prefix('(')
            .and_then(|s| s.strip_suffix(')'))
            .ok_or_else(|| format!("{op} needs a parenthesised list of values in {part:?}"))?;
        let values = inner.split(',').map(|v| label_value(v.trim(), part)).collect::<Result<Vec<_>, _>>()?;
        let key = label_key(key, part)?;
        return Ok(if op == "in" { Requirement::In(key, values) } else { Requirement::NotIn(key, values) });
    }
    Ok(Requirement::Exists(label_key(part, part)?))
}

/// Checks a label key on its own (`app`, `example.com/owner`), as the API
/// server would: the error names it.
pub fn check_label_key(key: &str) -> Result<(), String> {
    label_key(key, key).map(drop).map_err(|_| {
        format!(
            "{key:?} is not a label key: a name of at most 63 letters, digits, '-', '_' and '.', starting and \
             ending with a letter or digit, optionally after a DNS prefix and '/'"
        )
    })
}

fn label_key(key: &str, part: &str) -> Result<String, String> {
    let (prefix, name) = key.rsplit_once('/').map_or(("", key), |(p, n)| (p, n));
    let name_ok = !name.is_empty() && name.len() <= 63 && name.chars().all(label_char) && edges_alnum(name);
    let prefix_ok = prefix.len() <= 253 && prefix.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if !name_ok || !prefix_ok || (key.contains('/') && prefix.is_empty()) {
        return Err(format!("invalid label key {key:?} in {part:?}"));
    }
    Ok(key.to_owned())
}

fn label_value(value: &str, part: &str) -> Result<String, String> {
    if value.len() > 63 || !value.chars().all(label_char) || !(value.is_empty() || edges_alnum(value)) {
        return Err(format!("invalid label value {value:?} in {part:?}"));
    }
    Ok(value.to_owned())
}

/// The value of a `>` or `<`: a label value that is also an integer of 64
/// bits, both of which apimachinery's `NewRequirement` checks (so no sign:
/// a label value starts with a letter or digit).
fn integer_value(value: &str, op: char, part: &str) -> Result<i64, String> {
    let text = label_value(value, part)?;
    text.parse().map_err(|_| format!("'{op}' needs an integer value (64 bits), not {value:?}, in {part:?}"))
}

fn label_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

fn edges_alnum(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphanumeric()) && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(labels: &[(&str, &str)]) -> Meta {
        let mut meta = Meta::default();
        meta.labels = crate::informer::labels::Labels::new(labels.iter().copied());
        meta
    }

    #[test]
    fn selector_should_match_every_operator() {
        let m = meta(&[("app", "web"), ("tier", "front"), ("example.com/user", "alice")]);
        for (text, expected) in [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app=web,tier=front", true),
            ("app=web,tier=back", false),
            ("tier in (front, back)", true),
            ("tier notin (front,back)", false),
            ("missing notin (a)", true),
            ("app", true),
            ("!app", false),
            ("!legacy", true),
            ("example.com/user=alice", true),
        ] {
            let selector = LabelSelector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(selector.matches(&m), expected, "{text}");
        }
    }

    #[test]
    fn selector_should_refuse_malformed_text_and_say_why() {
        for text in ["app=", "=web", "a=b,,c=d", "tier in front", "tier in (a", "a b c", "app=we b", "-bad=x"] {
            let result = LabelSelector::parse(text);
            // `app=` selects an empty value, which the API server allows.
            if text == "app=" {
                assert!(result.is_ok(), "{text}");
                continue;
            }
            assert!(result.is_err(), "{text} should be refused, got {result:?}");
        }
    }

    #[test]
    fn greater_and_less_than_should_compare_the_label_as_an_integer_as_apimachinery_does() {
        let m = meta(&[("replicas", "3"), ("padded", "007"), ("name", "web")]);
        for (text, expected) in [
            ("replicas>1", true),
            ("replicas > 1", true),
            ("replicas>3", false),
            ("replicas<4", true),
            ("replicas<3", false),
            // Compared as numbers, not as text ("10" < "3" as text).
            ("replicas<10", true),
            ("padded>6", true),
            ("padded<8", true),
            // A label that is missing or not an integer matches neither.
            ("missing>0", false),
            ("missing<0", false),
            ("name>0", false),
            ("name<0", false),
            ("replicas>1,name=web", true),
        ] {
            let selector = LabelSelector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(selector.matches(&m), expected, "{text}");
        }
    }

    #[test]
    fn greater_and_less_than_should_refuse_a_value_that_is_not_an_integer_and_say_so() {
        for (text, expected) in [
            ("a>b", "'>' needs an integer value (64 bits), not \"b\", in \"a>b\""),
            ("a<1.5", "'<' needs an integer value (64 bits), not \"1.5\", in \"a<1.5\""),
            ("a>", "'>' needs an integer value (64 bits), not \"\", in \"a>\""),
            ("a>=1", "\">=\" is not an operator of label selectors, in \"a>=1\": use '>' or '<' with an integer"),
            (
                "a>99999999999999999999",
                "'>' needs an integer value (64 bits), not \"99999999999999999999\", in \"a>99999999999999999999\"",
            ),
            // Not a label value, as the API server says too: no sign.
            ("a>-1", "invalid label value \"-1\" in \"a>-1\""),
            ("a>1>2", "invalid label value \"1>2\" in \"a>1>2\""),
            (">1", "invalid label key \"\" in \">1\""),
        ] {
            assert_eq!(LabelSelector::parse(text), Err(expected.to_owned()), "{text}");
        }
    }
}
