//! Dates and times in the forms people and tools write them: found in a goal's text, read from a plan's value,
//! and written again in another form (`9:30 in the morning` ↔ `09:30`, `01/15/2024` ↔ `2024-01-15`), so that a
//! conversion a tool's schema asks for is done by code, not by the model.

use serde_json::Value;

/// A calendar date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Date {
    pub year: i32,
    pub month: u32,
    pub day: u32,
}

/// A time of day (24-hour); `second` where it was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Time {
    pub hour: u32,
    pub minute: u32,
    pub second: Option<u32>,
}

/// A date, a time of day, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    Date(Date),
    Time(Time),
    DateTime(Date, Time),
}

/// How a date is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateForm {
    /// `2024-01-15` (ISO 8601, `YYYY-MM-DD`).
    Iso,
    /// `01/15/2024` (`MM/DD/YYYY`).
    MonthFirst,
    /// `15/01/2024` (`DD/MM/YYYY`).
    DayFirst,
    /// `15.01.2024` (`DD.MM.YYYY`).
    Dotted,
}

/// How a time of day is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeForm {
    /// `09:30` (24-hour `HH:MM`).
    HourMinute,
    /// `09:30:00` (`HH:MM:SS`).
    HourMinuteSecond,
    /// `9:30 AM` (12-hour).
    Meridiem,
}

/// The form a parameter asks for: of dates, of times, or of both together (`date-time`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Asked {
    pub date: Option<DateForm>,
    pub time: Option<TimeForm>,
    pub date_time: bool,
}

impl Asked {
    fn is_empty(&self) -> bool {
        self.date.is_none() && self.time.is_none() && !self.date_time
    }
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

const WEEKDAYS: [&str; 7] = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"];

/// The names a date is also written with, lower-cased: its month's and its weekday's (the proleptic Gregorian
/// calendar; Sakamoto's method), so that "December" or "a Friday" read from `2026-12-25` is found in it.
pub fn date_names(d: Date) -> [&'static str; 2] {
    const OFFSETS: [i32; 12] = [0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4];
    let month = (d.month.clamp(1, 12) - 1) as usize;
    let year = if d.month < 3 { d.year - 1 } else { d.year };
    let weekday = (year + year / 4 - year / 100 + year / 400 + OFFSETS[month] + d.day as i32).rem_euclid(7);
    [MONTHS[month], WEEKDAYS[weekday as usize]]
}

/// The form a parameter's schema asks for: its `format` (`date`, `time`, `date-time`), else a form its
/// description shows (`YYYY-MM-DD`, `MM/DD/YYYY`, `DD/MM/YYYY`, `DD.MM.YYYY`, `HH:MM:SS`, `HH:MM`, "24-hour",
/// "12-hour", "AM/PM"). `None` where it asks for none.
pub fn asked_form(property: &Value) -> Option<Asked> {
    let mut asked = Asked::default();
    match property["format"].as_str() {
        Some("date") => asked.date = Some(DateForm::Iso),
        Some("time") => asked.time = Some(TimeForm::HourMinuteSecond),
        Some("date-time") => asked.date_time = true,
        _ => {}
    }
    if asked.is_empty() {
        let description = property["description"].as_str().unwrap_or("").to_uppercase();
        let has = |form: &str| description.contains(form);
        asked.date = [
            ("YYYY-MM-DD", DateForm::Iso),
            ("MM/DD/YYYY", DateForm::MonthFirst),
            ("DD/MM/YYYY", DateForm::DayFirst),
            ("DD.MM.YYYY", DateForm::Dotted),
        ]
        .into_iter()
        .find(|(text, _)| has(text))
        .map(|(_, form)| form);
        asked.time = if has("HH:MM:SS") {
            Some(TimeForm::HourMinuteSecond)
        } else if has("HH:MM") || has("24-HOUR") || has("24 HOUR") {
            Some(TimeForm::HourMinute)
        } else if has("12-HOUR") || has("AM/PM") {
            Some(TimeForm::Meridiem)
        } else {
            None
        };
    }
    (!asked.is_empty()).then_some(asked)
}

/// `moment` written as `asked` says, where the asked form holds that kind of moment (a date-time asked for a time
/// alone gives none; a date-time given where a date or a time is asked gives that part).
pub fn write_as(moment: Moment, asked: Asked) -> Option<String> {
    match moment {
        Moment::DateTime(date, time) if asked.date_time => Some(format!(
            "{}T{}",
            write_date(date, DateForm::Iso),
            write_time(Time { second: Some(time.second.unwrap_or(0)), ..time }, TimeForm::HourMinuteSecond)
        )),
        Moment::DateTime(date, time) => match (asked.date, asked.time) {
            (Some(d), Some(t)) => Some(format!("{} {}", write_date(date, d), write_time(time, t))),
            (Some(d), None) => Some(write_date(date, d)),
            (None, Some(t)) => Some(write_time(time, t)),
            (None, None) => None,
        },
        Moment::Date(date) => asked.date.map(|form| write_date(date, form)),
        Moment::Time(time) => asked.time.map(|form| write_time(time, form)),
    }
}

/// A date in a form.
pub fn write_date(d: Date, form: DateForm) -> String {
    match form {
        DateForm::Iso => format!("{:04}-{:02}-{:02}", d.year, d.month, d.day),
        DateForm::MonthFirst => format!("{:02}/{:02}/{:04}", d.month, d.day, d.year),
        DateForm::DayFirst => format!("{:02}/{:02}/{:04}", d.day, d.month, d.year),
        DateForm::Dotted => format!("{:02}.{:02}.{:04}", d.day, d.month, d.year),
    }
}

/// A time in a form.
pub fn write_time(t: Time, form: TimeForm) -> String {
    match form {
        TimeForm::HourMinute => format!("{:02}:{:02}", t.hour, t.minute),
        TimeForm::HourMinuteSecond => format!("{:02}:{:02}:{:02}", t.hour, t.minute, t.second.unwrap_or(0)),
        TimeForm::Meridiem => {
            let hour = if t.hour.is_multiple_of(12) { 12 } else { t.hour % 12 };
            format!("{hour}:{:02} {}", t.minute, if t.hour < 12 { "AM" } else { "PM" })
        }
    }
}

/// Every form a moment of this kind can be written in (for a schema's `pattern` to choose from).
pub fn every_form(moment: Moment) -> Vec<String> {
    let dates = [DateForm::Iso, DateForm::MonthFirst, DateForm::DayFirst, DateForm::Dotted];
    let times = [TimeForm::HourMinute, TimeForm::HourMinuteSecond, TimeForm::Meridiem];
    match moment {
        Moment::Date(d) => dates.iter().map(|f| write_date(d, *f)).collect(),
        Moment::Time(t) => times.iter().map(|f| write_time(t, *f)).collect(),
        Moment::DateTime(d, t) => {
            let mut all = vec![write_as(moment, Asked { date_time: true, ..Asked::default() }).unwrap_or_default()];
            all.extend(
                dates.iter().flat_map(|df| {
                    times.iter().map(move |tf| format!("{} {}", write_date(d, *df), write_time(t, *tf)))
                }),
            );
            all
        }
    }
}

/// The moment a whole value writes (surrounding space aside), if it writes one.
pub fn read_value(text: &str) -> Option<Moment> {
    let text = text.trim();
    match find_moments(text).as_slice() {
        [(written, moment)] if written.len() == text.len() => Some(*moment),
        _ => None,
    }
}

/// The dates and times a text writes, each with its text as written, in order.
pub fn find_moments(text: &str) -> Vec<(String, Moment)> {
    let lower = text.to_lowercase();
    // Positions agree between `text` and `lower` only where lowercasing keeps lengths; otherwise read `lower`.
    let source = if lower.len() == text.len() { text } else { lower.as_str() };
    let bytes = lower.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let starts_word = at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || b".:".contains(&bytes[at - 1]));
        if starts_word && lower.is_char_boundary(at) {
            if let Some((len, moment)) = moment_at(&lower[at..]) {
                found.push((source[at..at + len].to_string(), moment));
                at += len;
                continue;
            }
        }
        at += 1;
    }
    found
}

/// A date, time or date-time at the start of `s` (lowercase): its length and value.
fn moment_at(s: &str) -> Option<(usize, Moment)> {
    if let Some((len, date)) = date_at(s) {
        // `2024-01-15T09:30:00+09:00` (no meridiem after a `T`), `2024-01-15 9:30 pm`.
        let rest = &s[len..];
        let joined = match rest.strip_prefix('t') {
            Some(r) => time_at(r, true),
            None => rest.strip_prefix(' ').and_then(|r| time_at(r, false)),
        };
        if let Some((time_len, time)) = joined {
            let mut total = len + 1 + time_len;
            total += offset_len(&s[total..]);
            return Some((total, Moment::DateTime(date, time)));
        }
        return Some((len, Moment::Date(date)));
    }
    time_at(s, false).or_else(|| spelled_time_at(s)).map(|(len, time)| (len, Moment::Time(time)))
}

/// The length of a time zone offset or fraction after a time (`z`, `+09:00`, `.123`).
fn offset_len(s: &str) -> usize {
    let b = s.as_bytes();
    let mut len = 0;
    if b.first() == Some(&b'.') {
        len = 1 + digits(&s[1..]).1;
    }
    match b.get(len) {
        Some(b'z') => len + 1,
        Some(b'+' | b'-') => {
            let (hours, n) = digits(&s[len + 1..]);
            if n != 2 || hours > 14 {
                return len;
            }
            let rest = &s[len + 3..];
            match rest.strip_prefix(':').map(digits) {
                Some((_, 2)) => len + 6,
                _ => len + 3,
            }
        }
        _ => len,
    }
}

/// The number and count of the ASCII digits at the start of `s` (at most 4 read).
fn digits(s: &str) -> (u32, usize) {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    (s[..n.min(4)].parse().unwrap_or(0), n)
}

fn valid_date(year: i32, month: u32, day: u32) -> Option<Date> {
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        _ => return None,
    };
    (1..=days).contains(&day).then_some(Date { year, month, day })
}

/// A date at the start of `s`: `2024-01-15`, `01/15/2024` (month first unless the first number cannot be a
/// month), `15.01.2024`, `January 15, 2024`, `15 January 2024`.
fn date_at(s: &str) -> Option<(usize, Date)> {
    let (first, n1) = digits(s);
    if n1 == 4 {
        let rest = s[4..].strip_prefix('-')?;
        let (month, n2) = digits(rest);
        let rest = rest[n2..].strip_prefix('-')?;
        let (day, n3) = digits(rest);
        if !(1..=2).contains(&n2) || !(1..=2).contains(&n3) || followed_by_digit(&rest[n3..]) {
            return None;
        }
        return Some((4 + 1 + n2 + 1 + n3, valid_date(first as i32, month, day)?));
    }
    if (1..=2).contains(&n1) {
        if let Some(sep @ ('/' | '.')) = s[n1..].chars().next() {
            let rest = &s[n1 + 1..];
            let (second, n2) = digits(rest);
            let rest = rest.get(n2..)?.strip_prefix(sep)?;
            let (year, n3) = digits(rest);
            if !(1..=2).contains(&n2) || n3 != 4 || followed_by_digit(&rest[4..]) {
                return None;
            }
            let (month, day) = if sep == '.' || first > 12 { (second, first) } else { (first, second) };
            return Some((n1 + 1 + n2 + 1 + 4, valid_date(year as i32, month, day)?));
        }
        // 15 January 2024
        let rest = s[n1..].strip_prefix(' ')?;
        let (month, name_len) = month_at(rest)?;
        let after = rest[name_len..].strip_prefix(' ')?;
        let (year, n3) = digits(after);
        if n3 != 4 || followed_by_digit(&after[4..]) {
            return None;
        }
        return Some((n1 + 1 + name_len + 1 + 4, valid_date(year as i32, month, first)?));
    }
    // January 15, 2024
    let (month, name_len) = month_at(s)?;
    let rest = s[name_len..].strip_prefix(' ')?;
    let (day, n2) = digits(rest);
    if !(1..=2).contains(&n2) {
        return None;
    }
    let mut used = name_len + 1 + n2;
    let mut rest = &rest[n2..];
    for suffix in ["st", "nd", "rd", "th"] {
        if let Some(r) = rest.strip_prefix(suffix) {
            used += 2;
            rest = r;
            break;
        }
    }
    let comma = usize::from(rest.starts_with(','));
    let after = rest[comma..].strip_prefix(' ')?;
    let (year, n3) = digits(after);
    if n3 != 4 || followed_by_digit(&after[4..]) {
        return None;
    }
    Some((used + comma + 1 + 4, valid_date(year as i32, month, day)?))
}

fn followed_by_digit(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_digit())
}

/// A month's name or its three-letter short form at the start of `s`: its number and the length read.
fn month_at(s: &str) -> Option<(u32, usize)> {
    for (i, name) in MONTHS.iter().enumerate() {
        for candidate in [*name, &name[..3]] {
            if s.starts_with(candidate) && !s[candidate.len()..].starts_with(|c: char| c.is_ascii_alphabetic()) {
                return Some((i as u32 + 1, candidate.len()));
            }
        }
    }
    None
}

/// A time of day at the start of `s`: `9:30`, `09:30:15`, `9:30 am`, `7pm`, `7 p.m.`, `9:30 in the morning`. A
/// bare number is a time only with a meridiem (`7 pm`). `after_date`: the time follows a date (`2024-01-15T09:30`),
/// where no meridiem phrase is read.
fn time_at(s: &str, after_date: bool) -> Option<(usize, Time)> {
    let (hour, n1) = digits(s);
    if !(1..=2).contains(&n1) {
        return None;
    }
    let mut used = n1;
    let mut minute = None;
    let mut second = None;
    if let Some(rest) = s[used..].strip_prefix(':') {
        let (m, n2) = digits(rest);
        if n2 != 2 || m > 59 {
            return None;
        }
        minute = Some(m);
        used += 3;
        if let Some(rest) = s[used..].strip_prefix(':') {
            let (sec, n3) = digits(rest);
            if n3 == 2 && sec <= 59 {
                second = Some(sec);
                used += 3;
            }
        }
    }
    if followed_by_digit(&s[used..]) {
        return None;
    }
    let (meridiem, len) = if after_date { (None, 0) } else { meridiem_at(&s[used..]) };
    if minute.is_none() && meridiem.is_none() {
        return None;
    }
    let hour = match meridiem {
        Some(pm) => {
            if !(1..=12).contains(&hour) {
                return None;
            }
            hour % 12 + if pm { 12 } else { 0 }
        }
        None if hour > 23 => return None,
        None => hour,
    };
    Some((used + len, Time { hour, minute: minute.unwrap_or(0), second }))
}

/// The hours one to twelve as words.
const HOUR_WORDS: [&str; 12] =
    ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];

/// An hour of the clock written as a word or in digits (1–12) at the start of `s`, and its length.
fn clock_hour_at(s: &str) -> Option<(u32, usize)> {
    let (hour, n) = digits(s);
    if (1..=2).contains(&n) && (1..=12).contains(&hour) {
        return Some((hour, n));
    }
    // A whole word only ("ten", not "tennis"); no hour word starts another, so the first match is the one.
    let whole = |w: &&str| s.starts_with(*w) && !s[w.len()..].starts_with(char::is_alphabetic);
    HOUR_WORDS.iter().position(whole).map(|i| (i as u32 + 1, HOUR_WORDS[i].len()))
}

/// A time of day spelled out (lowercase): "noon", "midnight", "quarter past three", "half past 7", "a quarter to
/// nine", "three o'clock", each with an optional `am`/`pm` or half-of-the-day phrase after it ("quarter past three
/// in the afternoon" is 15:15; without one the hour is read as written, 3:15).
fn spelled_time_at(s: &str) -> Option<(usize, Time)> {
    let ends_word = |at: usize| !s[at..].starts_with(|c: char| c.is_alphanumeric());
    for (word, hour) in [("noon", 12), ("midday", 12), ("midnight", 0)] {
        if s.starts_with(word) && ends_word(word.len()) {
            return Some((word.len(), Time { hour, minute: 0, second: None }));
        }
    }
    let opening = s.strip_prefix("a ").map_or(0, |_| 2);
    let rest = &s[opening..];
    let relative = [("quarter past ", 15, false), ("half past ", 30, false), ("quarter to ", 45, true)];
    let (minute, to, used, hour, hour_len) = match relative.iter().find(|(text, _, _)| rest.starts_with(text)) {
        Some((text, minute, to)) => {
            let (hour, len) = clock_hour_at(&rest[text.len()..])?;
            (*minute, *to, opening + text.len(), hour, len)
        }
        None => {
            // "three o'clock": the hour, then the words.
            let (hour, len) = clock_hour_at(s)?;
            let after = &s[len..];
            let clock = [" o'clock", " o\u{2019}clock", " oclock"].into_iter().find(|c| after.starts_with(c))?;
            (0, false, 0, hour, len + clock.len())
        }
    };
    let mut end = used + hour_len;
    if !ends_word(end) {
        return None;
    }
    // The hour a "quarter to" names is the next one: "a quarter to nine" is 8:45.
    let hour = if to { (hour + 10) % 12 + 1 } else { hour };
    let (meridiem, len) = meridiem_at(&s[end..]);
    end += len;
    let hour = match meridiem {
        Some(pm) => hour % 12 + if pm { 12 } else { 0 },
        None => hour,
    };
    Some((end, Time { hour, minute, second: None }))
}

/// An `am`/`pm` after a time (`true` for pm), with the space before it, and its length; or a phrase that says
/// which half of the day ("in the morning", "in the afternoon", …), which is read but not taken as written.
fn meridiem_at(s: &str) -> (Option<bool>, usize) {
    let space = usize::from(s.starts_with(' '));
    let rest = &s[space..];
    for (text, pm) in [("a.m.", false), ("p.m.", true), ("am", false), ("pm", true)] {
        if rest.starts_with(text) && !rest[text.len()..].starts_with(|c: char| c.is_ascii_alphanumeric()) {
            return (Some(pm), space + text.len());
        }
    }
    for (text, pm) in
        [(" in the morning", false), (" in the afternoon", true), (" in the evening", true), (" at night", true)]
    {
        if s.starts_with(text) {
            // The phrase decides the half of the day, but the value as written is the time before it.
            return (Some(pm), 0);
        }
    }
    (None, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn time(hour: u32, minute: u32) -> Moment {
        Moment::Time(Time { hour, minute, second: None })
    }

    fn date(year: i32, month: u32, day: u32) -> Moment {
        Moment::Date(Date { year, month, day })
    }

    #[test]
    fn times_are_found_in_their_common_written_forms() {
        let found =
            find_moments("It's 9:30 in the morning in Tokyo, the call is at 7 pm, lunch at 12:15 PM and 19:05:30.");
        let values: Vec<(&str, Moment)> = found.iter().map(|(w, m)| (w.as_str(), *m)).collect();
        assert_eq!(
            values,
            vec![
                ("9:30", time(9, 30)),
                ("7 pm", time(19, 0)),
                ("12:15 PM", time(12, 15)),
                ("19:05:30", Moment::Time(Time { hour: 19, minute: 5, second: Some(30) })),
            ]
        );
        assert_eq!(read_value("6:45 in the evening"), None, "the phrase is not part of the value");
        assert_eq!(find_moments("at 6:45 in the evening")[0].1, time(18, 45));
        assert_eq!(read_value("12 am"), Some(time(0, 0)));
        assert_eq!(read_value("11:05 p.m."), Some(time(23, 5)));
        // Numbers that are not times: a bare number, a score, a ratio past the clock, a decimal.
        assert_eq!(find_moments("I have 7 apples, won 3:2 after 25:10, paid 4.50"), vec![]);
    }

    #[test]
    fn times_spelled_out_are_found() {
        let found = find_moments("If it's quarter past three in the afternoon in Lagos, or a quarter to nine, or noon");
        let values: Vec<(&str, Moment)> = found.iter().map(|(w, m)| (w.as_str(), *m)).collect();
        assert_eq!(
            values,
            vec![("quarter past three", time(15, 15)), ("a quarter to nine", time(8, 45)), ("noon", time(12, 0))]
        );
        assert_eq!(read_value("half past 7 pm"), Some(time(19, 30)));
        assert_eq!(read_value("twelve o'clock"), Some(time(12, 0)));
        assert_eq!(read_value("midnight"), Some(time(0, 0)));
        assert_eq!(find_moments("a quarter to one")[0].1, time(12, 45));
        // Words that only hold a time word, and an hour with nothing that makes it a time, are none.
        assert_eq!(find_moments("this afternoon, three people, one quarter past the deadline"), vec![]);
    }

    #[test]
    fn dates_are_found_in_their_common_written_forms() {
        let text = "Due 01/15/2024, moved to 2024-02-01, then 15.03.2024, 25/12/2024, March 5th, 2025 and 7 Jan 2026.";
        let values: Vec<Moment> = find_moments(text).into_iter().map(|(_, m)| m).collect();
        assert_eq!(
            values,
            vec![
                date(2024, 1, 15),
                date(2024, 2, 1),
                date(2024, 3, 15),
                date(2024, 12, 25),
                date(2025, 3, 5),
                date(2026, 1, 7)
            ]
        );
        assert_eq!(read_value("02/30/2024"), None, "no such day");
        assert_eq!(read_value("2024-13-01"), None);
    }

    #[test]
    fn date_times_keep_both_parts_and_skip_the_offset() {
        let moment = read_value("2026-11-29T18:30:00+09:00").unwrap();
        assert_eq!(
            moment,
            Moment::DateTime(Date { year: 2026, month: 11, day: 29 }, Time { hour: 18, minute: 30, second: Some(0) })
        );
        assert_eq!(
            read_value("2024-01-15 09:30"),
            Some(Moment::DateTime(Date { year: 2024, month: 1, day: 15 }, Time { hour: 9, minute: 30, second: None }))
        );
    }

    #[test]
    fn the_asked_form_comes_from_format_or_the_description() {
        let hm =
            asked_form(&json!({"type": "string", "description": "Time to convert in 24-hour format (HH:MM)"})).unwrap();
        assert_eq!(hm.time, Some(TimeForm::HourMinute));
        assert_eq!(asked_form(&json!({"format": "date"})).unwrap().date, Some(DateForm::Iso));
        assert_eq!(
            asked_form(&json!({"description": "Day of travel, MM/DD/YYYY"})).unwrap().date,
            Some(DateForm::MonthFirst)
        );
        assert_eq!(
            asked_form(&json!({"description": "start, like 9:00 AM (12-hour)"})).unwrap().time,
            Some(TimeForm::Meridiem)
        );
        assert!(asked_form(&json!({"description": "The date of the meeting"})).is_none());
    }

    #[test]
    fn moments_are_written_in_the_asked_form_both_ways() {
        let hm = Asked { time: Some(TimeForm::HourMinute), ..Asked::default() };
        assert_eq!(write_as(read_value("9:30 am").unwrap(), hm).as_deref(), Some("09:30"));
        assert_eq!(write_as(read_value("7:15 PM").unwrap(), hm).as_deref(), Some("19:15"));
        assert_eq!(write_as(read_value("2026-11-29T18:30:00+09:00").unwrap(), hm).as_deref(), Some("18:30"));
        let meridiem = Asked { time: Some(TimeForm::Meridiem), ..Asked::default() };
        assert_eq!(write_as(read_value("00:15").unwrap(), meridiem).as_deref(), Some("12:15 AM"));
        assert_eq!(write_as(read_value("19:00").unwrap(), meridiem).as_deref(), Some("7:00 PM"));
        let iso = Asked { date: Some(DateForm::Iso), ..Asked::default() };
        assert_eq!(write_as(read_value("01/15/2024").unwrap(), iso).as_deref(), Some("2024-01-15"));
        let us = Asked { date: Some(DateForm::MonthFirst), ..Asked::default() };
        assert_eq!(write_as(read_value("2024-01-15").unwrap(), us).as_deref(), Some("01/15/2024"));
        assert_eq!(write_as(read_value("January 15, 2024").unwrap(), us).as_deref(), Some("01/15/2024"));
        let dotted = Asked { date: Some(DateForm::Dotted), ..Asked::default() };
        assert_eq!(write_as(read_value("2024-01-15").unwrap(), dotted).as_deref(), Some("15.01.2024"));
        assert_eq!(write_as(read_value("01/15/2024").unwrap(), hm), None, "a date has no time to give");
    }

    #[test]
    fn a_date_names_its_month_and_weekday() {
        let d = |year, month, day| Date { year, month, day };
        assert_eq!(date_names(d(2026, 12, 25)), ["december", "friday"]);
        assert_eq!(date_names(d(2024, 2, 29)), ["february", "thursday"]);
        assert_eq!(date_names(d(2000, 1, 1)), ["january", "saturday"]);
    }
}
