//! Queue names: which names the config file accepts.

/// Longest queue name, as a DNS subdomain.
pub(super) const MAX_LEN: usize = 253;

/// Checks a queue name: 1 to `MAX_LEN` characters from `a-z`, `0-9`, `.`, `-`
/// and `_`. The error says what is allowed.
pub(super) fn check(name: &str) -> Result<(), String> {
    check_as("queue", name)
}

/// Checks the name of a queue, an informer or an index (`what`) by the same rules.
pub(super) fn check_as(what: &str, name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '_');
    if name.is_empty() || name.len() > MAX_LEN || !name.chars().all(allowed) {
        return Err(format!(
            "{what} name {name:?} is not allowed: use 1 to {MAX_LEN} characters from a-z, 0-9, '.', '-' and '_'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_should_accept_dns_like_names() {
        for name in ["default", "orders", "users.example.com", "a-b_c.9", "0"] {
            assert_eq!(check(name), Ok(()), "{name}");
        }
        assert_eq!(check(&"a".repeat(MAX_LEN)), Ok(()));
    }

    #[test]
    fn check_should_refuse_other_names_and_say_what_is_allowed() {
        for name in ["", "Orders", "a b", "a/b", "ö", "a:b"] {
            let err = check(name).unwrap_err();
            assert!(err.contains("use 1 to 253 characters from a-z, 0-9"), "{name}: {err}");
        }
        assert!(check(&"a".repeat(MAX_LEN + 1)).is_err());
    }
}
