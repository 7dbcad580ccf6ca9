//! Free text held to a byte bound: cut at a character boundary, the cut said at its end.

/// `text`, at most `limit` bytes: cut at a character boundary, saying so at its end.
pub fn cut(mut text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let total = text.len();
    let note = format!("… (cut: {total} bytes in all)");
    let mut end = limit - note.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&note);
    text
}
