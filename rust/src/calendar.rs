//! Dates of the proleptic Gregorian calendar from day numbers since 1970-01-01 (what Iceberg
//! partition paths, table file names and JSON values print).

/// (year, month 1-12, day 1-31) of a day number since 1970-01-01 (proleptic Gregorian;
/// Howard Hinnant's civil_from_days).
pub fn civil(day: i64) -> (i64, i64, i64) {
    let z = day + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `YYYY-MM-DD` of a day number since 1970-01-01 (Iceberg's human form of a day).
pub fn ymd(day: i64) -> String {
    let (year, month, dom) = civil(day);
    format!("{year:04}-{month:02}-{dom:02}")
}

#[cfg(test)]
mod tests {
    use super::civil;

    #[test]
    fn days_are_dates() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(-1), (1969, 12, 31));
        assert_eq!(civil(11_016), (2000, 2, 29));
        assert_eq!(civil(17_486), (2017, 11, 16));
        assert_eq!(super::ymd(-1), "1969-12-31");
    }
}
