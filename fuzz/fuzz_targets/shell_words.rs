//! The shell word splitter: any command line is split into words or refused; words with no quote, backslash or
//! blank read back the same when joined with spaces.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tandem::tools::shell::split_command;

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else { return };
    let Ok(words) = split_command(line) else { return };
    let plain = |w: &String| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=,:".contains(c));
    if words.iter().all(plain) {
        assert_eq!(split_command(&words.join(" ")).unwrap(), words);
    }
});
