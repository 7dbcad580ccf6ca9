//! Times as Kubernetes' JSON writes them: RFC 3339 in UTC, `metav1.Time` in whole seconds and `metav1.MicroTime` with six digits.

/// Seconds from 1970 to Go's zero time (0001-01-01T00:00:00Z), which both
/// time types write as `null`.
const GO_ZERO_TIME: i64 = -62_135_596_800;

/// Writes the instant `seconds` + `nanos` after 1970 as a JSON value:
/// `"2006-01-02T15:04:05Z"`, with `.000000` microseconds when `micros`;
/// `null` for Go's zero time.
pub fn write_time(out: &mut Vec<u8>, seconds: i64, nanos: i64, micros: bool) {
    // Go's time.Unix carries whole seconds out of the nanoseconds.
    let seconds = seconds.saturating_add(nanos.div_euclid(1_000_000_000));
    let nanos = nanos.rem_euclid(1_000_000_000);
    if seconds == GO_ZERO_TIME && (nanos == 0 || !micros) {
        out.extend_from_slice(b"null");
        return;
    }
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    out.push(b'"');
    if year < 0 {
        out.push(b'-');
    }
    push_padded(out, year.unsigned_abs(), 4);
    out.push(b'-');
    push_padded(out, month, 2);
    out.push(b'-');
    push_padded(out, day, 2);
    out.push(b'T');
    push_padded(out, (of_day / 3600) as u64, 2);
    out.push(b':');
    push_padded(out, (of_day / 60 % 60) as u64, 2);
    out.push(b':');
    push_padded(out, (of_day % 60) as u64, 2);
    if micros {
        out.push(b'.');
        push_padded(out, (nanos / 1000) as u64, 6);
    }
    out.extend_from_slice(b"Z\"");
}

/// `value` in decimal, zero-padded to at least `width` digits.
fn push_padded(out: &mut Vec<u8>, value: u64, width: usize) {
    let mut digits = itoa::Buffer::new();
    let text = digits.format(value);
    out.extend(std::iter::repeat_n(b'0', width.saturating_sub(text.len())));
    out.extend_from_slice(text.as_bytes());
}

/// The proleptic Gregorian (year, month, day) of a day counted from
/// 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u64, u64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u64;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 } as u64;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(seconds: i64, nanos: i64, micros: bool) -> String {
        let mut out = Vec::new();
        write_time(&mut out, seconds, nanos, micros);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn times_should_be_written_in_utc_as_kubernetes_writes_them() {
        assert_eq!(time(0, 0, false), r#""1970-01-01T00:00:00Z""#);
        assert_eq!(time(1_764_150_000, 999_999_999, false), r#""2025-11-26T09:40:00Z""#);
        assert_eq!(time(1_764_150_000, 123_456_789, true), r#""2025-11-26T09:40:00.123456Z""#);
        assert_eq!(time(951_782_400, 0, false), r#""2000-02-29T00:00:00Z""#);
        assert_eq!(time(-1, 0, false), r#""1969-12-31T23:59:59Z""#);
        assert_eq!(time(253_402_300_799, 0, false), r#""9999-12-31T23:59:59Z""#);
        assert_eq!(time(GO_ZERO_TIME, 0, false), "null");
        assert_eq!(time(GO_ZERO_TIME, 0, true), "null");
        assert_eq!(time(GO_ZERO_TIME, 1000, true), r#""0001-01-01T00:00:00.000001Z""#);
        assert_eq!(time(5, -1, true), r#""1970-01-01T00:00:04.999999Z""#);
    }
}
