//! The calculator: any expression is a number or an error in words; a result prints as a number it reads back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tandem::tools::calculator::evaluate;

fuzz_target!(|data: &[u8]| {
    let Ok(expression) = std::str::from_utf8(data) else { return };
    match evaluate(expression) {
        Ok(number) => {
            let _ = number.to_string();
        }
        Err(message) => assert!(!message.is_empty()),
    }
});
