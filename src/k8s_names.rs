//! Kubernetes' rules for names (apimachinery's DNS-1123 label and subdomain), written once for every caller.

/// A DNS-1123 label, as a namespace's name: 1 to 63 lowercase letters,
/// digits and '-', starting and ending with a letter or digit.
pub fn is_dns_label(name: &str) -> bool {
    name.len() <= 63 && is_label_text(name)
}

/// A DNS-1123 subdomain, as most objects' names and a finalizer's domain: at
/// most 253 bytes of dot-separated parts, each lowercase letters, digits and
/// '-', starting and ending with a letter or digit. Its parts, unlike a
/// label, may be longer than 63 (apimachinery's `IsDNS1123Subdomain`).
pub fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_label_text)
}

/// A label's characters, of any length: not empty, `[a-z0-9-]`, and a
/// letter or digit at each end.
fn is_label_text(text: &str) -> bool {
    !text.is_empty()
        && text.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dns_label_should_be_short_lowercase_and_end_with_letters_or_digits() {
        for good in ["a", "default", "kube-system", "0", &"a".repeat(63)] {
            assert!(is_dns_label(good), "{good}");
        }
        for bad in ["", "-a", "a-", "A", "a.b", "a_b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }

    #[test]
    fn a_dns_subdomain_should_be_dot_separated_labels_of_at_most_253_bytes() {
        for good in ["a", "example.com", "a-b.c-d", &"a".repeat(64), &["a"; 127].join(".")] {
            assert!(is_dns_subdomain(good), "{good}");
        }
        for bad in ["", ".", "a.", ".a", "a..b", "a.-b", "A.b", "a_b.c", &"a".repeat(254)] {
            assert!(!is_dns_subdomain(bad), "{bad}");
        }
    }
}
