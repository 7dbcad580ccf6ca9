//! ListObjects page tokens: where the next page starts, and which listing it continues.

use crate::informer::CacheReadError;

/// Every token starts with this, then the listing's fingerprint (16 hex
/// digits), `:`, and the last key served (which may hold `:` itself).
const PREFIX: &str = "after:";

/// One listing: the informer and the filters of the request. A token
/// continues only the listing that issued it, since the key it holds is a
/// place in that listing alone (in another informer's cache it would skip
/// or repeat objects). The page size may change from page to page.
pub struct Listing<'a> {
    pub informer: &'a str,
    pub namespace: &'a str,
    pub label_selector: &'a str,
    pub index_name: &'a str,
    pub index_value: &'a str,
}

impl Listing<'_> {
    /// The token of the page that starts after `key`.
    pub fn token_after(&self, key: &str) -> String {
        format!("{PREFIX}{:016x}:{key}", self.fingerprint())
    }

    /// The key after which `token`'s page starts; refused when the token is
    /// not one this server issued, or was issued for another listing.
    pub fn continue_after<'t>(&self, token: &'t str) -> Result<&'t str, CacheReadError> {
        let not_a_token = || CacheReadError::BadPageToken(token.to_owned());
        let (fingerprint, key) =
            token.strip_prefix(PREFIX).and_then(|rest| rest.split_once(':')).ok_or_else(not_a_token)?;
        if fingerprint.len() != 16 || !fingerprint.bytes().all(|b| b.is_ascii_hexdigit()) || key.is_empty() {
            return Err(not_a_token());
        }
        if u64::from_str_radix(fingerprint, 16).ok() != Some(self.fingerprint()) {
            return Err(CacheReadError::PageTokenOfAnotherListing(token.to_owned()));
        }
        Ok(key)
    }

    /// FNV-1a over each field's length and bytes (the lengths keep `a`,`bc`
    /// apart from `ab`,`c`). Not std's hasher, whose output may change from
    /// one Rust release to the next: a token read by a rebuilt sidecar would
    /// then be refused as another listing's.
    fn fingerprint(&self) -> u64 {
        const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let fields = [self.informer, self.namespace, self.label_selector, self.index_name, self.index_value];
        let bytes = fields.iter().flat_map(|field| (field.len() as u64).to_le_bytes().into_iter().chain(field.bytes()));
        bytes.fold(OFFSET, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(PRIME))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing<'a>(informer: &'a str, label_selector: &'a str) -> Listing<'a> {
        Listing { informer, namespace: "", label_selector, index_name: "", index_value: "" }
    }

    #[test]
    fn a_token_should_continue_its_own_listing_after_its_key() {
        let users = listing("users", "app=web");
        let token = users.token_after("ns/a:b");
        assert_eq!(users.continue_after(&token).unwrap(), "ns/a:b");
    }

    #[test]
    fn a_token_of_another_informer_or_other_filters_should_be_refused_as_such() {
        let token = listing("users", "").token_after("ns/a");
        for other in [listing("groups", ""), listing("users", "app=web"), listing("user", "s")] {
            let refused = other.continue_after(&token);
            assert!(matches!(refused, Err(CacheReadError::PageTokenOfAnotherListing(_))), "{refused:?}");
        }
    }

    #[test]
    fn text_that_is_no_token_should_be_refused_as_such() {
        let users = listing("users", "");
        let fingerprint = format!("{:016x}", users.fingerprint());
        for text in ["ns/a", "after:ns/a", &format!("after:{fingerprint}:"), &format!("after:{fingerprint}ns/a")] {
            let refused = users.continue_after(text);
            assert!(matches!(refused, Err(CacheReadError::BadPageToken(_))), "{text}: {refused:?}");
        }
    }
}
