//! The text of a member's claims in its Lease: slot runs as base64url varints, a quarter of the decimal ranges' size.
//!
//! Every member reads every member's Lease each retry period, and a member
//! of three claims about 150 runs of slots (`TOKENS` arcs of the ring), so
//! the claims are most of what membership costs on the wire: as decimal
//! ranges (`0-17,40,52-60`) about 1,400 bytes, in this form about 340.
//!
//! The form: [`PREFIX`], then for each run of adjacent slots in ascending
//! order two numbers, the gap since the previous run's end (the first run's
//! first slot) and the run's length less one. Each number is written least
//! significant group first, 5 bits a character of the base64url alphabet,
//! with the character's bit 5 set when more groups follow. The empty set is
//! the empty string. A value another build writes in a form this one does
//! not know is refused ([`ClaimsTextError`]), and the Lease is taken to claim
//! every slot (`shard_membership`), never none.

use std::fmt;

use super::slot::{SLOTS, Slot, SlotSet};

/// Names the form, so that another one can be told apart.
pub const PREFIX: &str = "v2:";

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const MORE: u8 = 32;
const GROUP_BITS: u32 = 5;

/// Claims text that is not in this form, or names slots outside `0..SLOTS`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("claims {text:?} are not in the {PREFIX} form: {why}")]
pub struct ClaimsTextError {
    text: String,
    why: &'static str,
}

impl SlotSet {
    /// The set as a member publishes it in its Lease.
    pub fn to_claims_text(&self) -> String {
        let runs = self.runs();
        if runs.is_empty() {
            return String::new();
        }
        let mut text = String::with_capacity(PREFIX.len() + runs.len() * 3);
        text.push_str(PREFIX);
        let mut previous_end = 0;
        for (first, end) in runs {
            push_number(&mut text, first - previous_end);
            push_number(&mut text, end - first - 1);
            previous_end = end;
        }
        text
    }

    /// Reads [`SlotSet::to_claims_text`]'s text back.
    pub fn parse_claims_text(text: &str) -> Result<SlotSet, ClaimsTextError> {
        let refuse = |why| ClaimsTextError { text: abridged(text), why };
        if text.is_empty() {
            return Ok(SlotSet::EMPTY);
        }
        let body = text.strip_prefix(PREFIX).ok_or_else(|| refuse("no prefix"))?;
        let mut digits = body.bytes();
        let mut set = SlotSet::EMPTY;
        let mut previous_end = 0usize;
        while let Some(gap) = next_number(&mut digits).map_err(refuse)? {
            let length = next_number(&mut digits).map_err(refuse)?.ok_or_else(|| refuse("a run without its length"))?;
            let first = previous_end + gap;
            let end = first + length + 1;
            if end > SLOTS {
                return Err(refuse("a slot out of range"));
            }
            for slot in (first..end).filter_map(Slot::new) {
                set.insert(slot);
            }
            previous_end = end;
        }
        Ok(set)
    }

    /// Runs as `first-last` decimal ranges, for people (logs, `Debug`).
    pub fn to_ranges_text(&self) -> String {
        let parts: Vec<String> = self
            .runs()
            .into_iter()
            .map(|(first, end)| if end == first + 1 { format!("{first}") } else { format!("{first}-{}", end - 1) })
            .collect();
        parts.join(",")
    }
}

impl fmt::Debug for SlotSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SlotSet[{}]", self.to_ranges_text())
    }
}

fn push_number(text: &mut String, mut value: usize) {
    loop {
        let group = u8::try_from(value & 31).unwrap_or(0);
        value >>= GROUP_BITS;
        let digit = if value == 0 { group } else { group | MORE };
        text.push(char::from(ALPHABET[usize::from(digit)]));
        if value == 0 {
            return;
        }
    }
}

/// The next number, `None` at the end of the text.
fn next_number(digits: &mut impl Iterator<Item = u8>) -> Result<Option<usize>, &'static str> {
    let mut value = 0usize;
    let mut shift = 0;
    let Some(mut byte) = digits.next() else { return Ok(None) };
    loop {
        let digit = ALPHABET.iter().position(|c| *c == byte).ok_or("a character outside base64url")?;
        value |= (digit & 31) << shift;
        // Any number here is below SLOTS, three groups at most.
        if value > SLOTS || shift > 2 * GROUP_BITS {
            return Err("a slot out of range");
        }
        if digit & usize::from(MORE) == 0 {
            return Ok(Some(value));
        }
        shift += GROUP_BITS;
        byte = digits.next().ok_or("a number cut short")?;
    }
}

/// Enough of a bad value to recognise it in a log.
fn abridged(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::{Assignment, MemberId};
    use proptest::prelude::*;

    #[test]
    fn runs_should_be_written_as_gaps_and_lengths() {
        // Runs 0-2, 9, 40-41, 4095: (0, 2), (6, 0), (30, 1), (4053, 0).
        // 4053 = 21 + 30·32 + 3·1024: 'V' (21) + 32 = '1', 'e' (30) + 32 = '-', 'D'.
        assert_eq!(SlotSet::of(&[0, 1, 2, 9, 40, 41, 4095]).to_claims_text(), "v2:ACGAeB1-DA");
        assert_eq!(SlotSet::EMPTY.to_claims_text(), "");
        assert_eq!(SlotSet::FULL.to_claims_text(), "v2:A__D");
        assert_eq!(SlotSet::of(&[0, 1, 2, 9, 40, 41, 4095]).to_ranges_text(), "0-2,9,40-41,4095");
    }

    #[test]
    fn text_in_another_form_or_out_of_range_should_be_refused() {
        for bad in [
            "0-2,9",    // the decimal ranges of earlier builds
            "v3:AC",    // a later form
            "v2:A",     // a run without its length
            "v2:AC!A",  // not base64url
            "v2:g",     // cut short: 'g' has bit 5 set
            "v2:AggE",  // from slot 0, 4,097 slots long
            "v2:_____", // a number far too large
        ] {
            assert!(SlotSet::parse_claims_text(bad).is_err(), "{bad:?} was read");
        }
        assert_eq!(SlotSet::parse_claims_text("v2:"), Ok(SlotSet::EMPTY));
    }

    #[test]
    fn a_members_share_should_take_under_a_third_of_its_decimal_ranges() {
        let members: Vec<MemberId> = ["r0", "r1", "r2"].iter().map(|m| std::sync::Arc::from(*m)).collect();
        let assignment = Assignment::compute(&members);
        for member in &members {
            let mine = assignment.slots_of(member);
            let (compact, ranges) = (mine.to_claims_text().len(), mine.to_ranges_text().len());
            assert!(compact * 3 < ranges, "{member}: {compact} bytes against {ranges} as ranges");
        }
    }

    proptest! {
        #[test]
        fn any_set_should_read_back_as_itself(indexes in proptest::collection::vec(0..SLOTS, 0..600)) {
            let mine = SlotSet::of(&indexes);
            prop_assert_eq!(SlotSet::parse_claims_text(&mine.to_claims_text()), Ok(mine));
        }
    }
}
