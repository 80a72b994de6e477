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

#[cfg(test)]
mod tests {
    use super::utc;

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
