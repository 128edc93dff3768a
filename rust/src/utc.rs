//! Seconds since the epoch → calendar date and time in UTC, for session names and the proxy's
//! log lines. Both are UTC by design, so no time-zone database is needed.

/// A moment in UTC, in the proleptic Gregorian calendar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Utc {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u64,
    pub minute: u64,
    pub second: u64,
}

impl Utc {
    pub fn from_unix(secs: u64) -> Utc {
        let rem = secs % 86_400;
        // Days → civil date: shift the epoch to 0000-03-01 so leap days end each 400-year era.
        let z = (secs / 86_400) as i64 + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        Utc {
            year: yoe + era * 400 + i64::from(month <= 2),
            month,
            day,
            hour: rem / 3600,
            minute: rem / 60 % 60,
            second: rem % 60,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ymd_hms(secs: u64) -> (i64, u32, u32, u64, u64, u64) {
        let t = Utc::from_unix(secs);
        (t.year, t.month, t.day, t.hour, t.minute, t.second)
    }

    #[test]
    fn calendar_edges() {
        assert_eq!(ymd_hms(0), (1970, 1, 1, 0, 0, 0));
        // The last second of a year, and the leap days of 2000 (a 400-year) and 2024.
        assert_eq!(ymd_hms(946_684_799), (1999, 12, 31, 23, 59, 59));
        assert_eq!(ymd_hms(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(ymd_hms(1_709_208_000), (2024, 2, 29, 12, 0, 0));
        // 2100 is not a leap year: 28 February is followed by 1 March.
        assert_eq!(ymd_hms(4_107_542_399), (2100, 2, 28, 23, 59, 59));
        assert_eq!(ymd_hms(4_107_542_400), (2100, 3, 1, 0, 0, 0));
    }
}
