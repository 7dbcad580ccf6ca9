//! Field selectors in the API server's text syntax (`metadata.name=web,status.phase!=Running`), checked before a watch is opened.

/// A parsed field selector: `key=value`, `key==value` or `key!=value` terms
/// joined by commas; `\` escapes `,`, `=`, `!` and `\` in a value. Which
/// fields a resource supports is the API server's to say; this checks only
/// the syntax, which the server would otherwise refuse on every retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSelector(Vec<FieldTerm>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    pub field: String,
    pub equals: bool,
    pub value: String,
}

impl FieldSelector {
    /// Parses the text; the error says what is wrong and where.
    pub fn parse(text: &str) -> Result<FieldSelector, String> {
        let mut terms = Vec::new();
        for term in split_unescaped(text, ',') {
            let term = term.trim();
            if term.is_empty() {
                if text.trim().is_empty() {
                    continue;
                }
                return Err(format!("empty term in field selector {text:?}"));
            }
            terms.push(field_term(term, text)?);
        }
        Ok(FieldSelector(terms))
    }

    pub fn terms(&self) -> &[FieldTerm] {
        &self.0
    }
}

fn field_term(term: &str, text: &str) -> Result<FieldTerm, String> {
    // The first unescaped operator splits the term; `!=` and `==` before `=`.
    let bytes = term.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'!' if bytes.get(i + 1) == Some(&b'=') => return term_of(term, i, 2, false, text),
            b'=' if bytes.get(i + 1) == Some(&b'=') => return term_of(term, i, 2, true, text),
            b'=' => return term_of(term, i, 1, true, text),
            _ => i += 1,
        }
    }
    Err(format!("{term:?} in field selector {text:?} has no operator: use =, == or !="))
}

fn term_of(term: &str, at: usize, width: usize, equals: bool, text: &str) -> Result<FieldTerm, String> {
    let field = term[..at].trim();
    let value = &term[at + width..];
    if field.is_empty() {
        return Err(format!("{term:?} in field selector {text:?} names no field"));
    }
    if !field.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/')) {
        return Err(format!("invalid field name {field:?} in field selector {text:?}"));
    }
    if let Some(bad) = unescaped_operator(value) {
        return Err(format!("{term:?} in field selector {text:?}: an unescaped {bad:?} in the value"));
    }
    Ok(FieldTerm { field: field.to_owned(), equals, value: unescape(value) })
}

/// The first `=` or `!` not escaped by a backslash.
fn unescaped_operator(value: &str) -> Option<char> {
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '=' | '!' => return Some(c),
            _ => {}
        }
    }
    None
}

fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        out.push(if c == '\\' { chars.next().unwrap_or('\\') } else { c });
    }
    out
}

/// Splits at `separator` where it is not escaped by a backslash.
fn split_unescaped(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut escaped) = (0, false);
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            c if c == separator => {
                parts.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_selector_should_read_each_operator_and_escapes() {
        let selector = FieldSelector::parse("metadata.name=web, status.phase!=Running,spec.x==a\\,b").unwrap();
        let terms: Vec<_> = selector.terms().iter().map(|t| (t.field.as_str(), t.equals, t.value.as_str())).collect();
        assert_eq!(
            terms,
            [("metadata.name", true, "web"), ("status.phase", false, "Running"), ("spec.x", true, "a,b")]
        );
        assert!(FieldSelector::parse("").unwrap().terms().is_empty());
        assert!(FieldSelector::parse("metadata.name=").is_ok(), "an empty value is allowed");
    }

    #[test]
    fn field_selector_should_refuse_malformed_text_and_say_why() {
        for text in ["metadata.name", "=web", "a=b,,c=d", "a=b=c", "a b=c", "a!b"] {
            let result = FieldSelector::parse(text);
            assert!(result.is_err(), "{text:?} should be refused, got {result:?}");
        }
    }
}
