//! Times as the log, the CLI and the API show them, and the clock events are stamped with.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch now: an event's `time_ms` (0 for a clock before 1970).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` from Unix milliseconds (proleptic Gregorian, UTC): how `mnemo log`
/// shows an event's time.
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Days to civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// Unix milliseconds from an RFC 3339 time, `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (a
/// space for the `T`, and lower-case `t`/`z`, taken too), as API filters such as
/// `created_at_gte` carry it; `None` for anything else or a time before 1970. Inverse of [`utc`]
/// to the millisecond (finer digits are dropped).
pub fn parse_rfc3339(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.len() < 20 || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    if b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in[usize::try_from(month - 1).ok()?]
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &text[19..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let n = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        let first3: String = fraction[..n.min(3)]
            .chars()
            .chain("00".chars())
            .take(3)
            .collect();
        millis = first3.parse::<i64>().ok()?;
        rest = &fraction[n..];
    }
    let offset_minutes = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            if rest.len() != 6 || rest.as_bytes()[3] != b':' {
                return None;
            }
            let (hh, mm) = (rest.get(1..3)?, rest.get(4..6)?);
            if !hh.bytes().chain(mm.bytes()).all(|c| c.is_ascii_digit()) {
                return None;
            }
            let hours: i64 = hh.parse().ok()?;
            let minutes: i64 = mm.parse().ok()?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            sign * (hours * 60 + minutes)
        }
    };
    // Civil date to days (Howard Hinnant's algorithm, the inverse of the one in `utc`).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second.min(59) - offset_minutes * 60;
    u64::try_from(secs * 1000 + millis).ok()
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn rfc3339_times_read_back_what_utc_writes() {
        use super::parse_rfc3339;
        for ms in [
            0,
            1,
            999,
            86_399_999,
            951_782_400_000,
            1_796_000_123_456,
            4_102_444_800_000,
        ] {
            assert_eq!(parse_rfc3339(&utc(ms)), Some(ms), "{}", utc(ms));
        }
        assert_eq!(
            parse_rfc3339("2026-12-04T08:00:00+01:00"),
            parse_rfc3339("2026-12-04T07:00:00Z")
        );
        assert_eq!(
            parse_rfc3339("2026-12-04 07:00:00.5z"),
            parse_rfc3339("2026-12-04T07:00:00.500Z")
        );
        assert_eq!(
            parse_rfc3339("2026-12-04T07:00:00.123456789Z"),
            parse_rfc3339("2026-12-04T07:00:00.123Z")
        );
        for bad in [
            "",
            "2026-12-04",
            "2026-12-04T07:00:00",
            "2026-13-04T07:00:00Z",
            "2026-02-30T07:00:00Z",
            "2026-12-04T24:00:00Z",
            "2026-12-04T07:00:00.Z",
            "2026-12-04T07:00:00+1:00",
            "1969-12-31T23:59:59Z",
            "+026-12-04T07:00:00Z",
            "2026-12-04T07:00:00Z ",
            "２０２6-12-04T07:00:00Z",
            "2026-12-04T07:00:00+é:00",
            "2026-12-04T07:00:00+00:é",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn unix_milliseconds_read_as_utc_dates_across_leap_days_and_centuries() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(utc(951_868_800_000 - 1), "2000-02-29T23:59:59.999Z");
        assert_eq!(utc(1_709_164_800_123), "2024-02-29T00:00:00.123Z");
        assert_eq!(utc(4_102_444_800_000), "2100-01-01T00:00:00.000Z");
        assert_eq!(utc(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
    }
}
