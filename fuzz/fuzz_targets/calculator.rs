//! The calculator: any expression or equation is a number or an error in words; a solved equation names its
//! unknown and gives a finite root.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tandem::tools::calculator::evaluate;
use tandem::tools::equation::{is_equation, solve};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let outcome = if is_equation(text) {
        solve(text).map(|(name, root)| (Some(name), root))
    } else {
        evaluate(text).map(|number| (None, number))
    };
    match outcome {
        Ok((name, number)) => {
            let printed = number.to_string();
            assert!(!printed.is_empty());
            if let Some(name) = name {
                assert!(!name.is_empty(), "a solved equation names its unknown");
                assert!(number.as_f64().is_finite(), "{text:?}: root {printed} is not a number");
            }
        }
        Err(message) => assert!(!message.is_empty()),
    }
});
