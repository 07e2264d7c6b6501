//! The tools file loader: any text is a list of command tools or an error naming the file (and a line inside it
//! when it gives one).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use tandem::tools::{parse_tool_file, ToolError};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match parse_tool_file(text, Path::new("tools.toml")) {
        Ok(_) => {}
        Err(ToolError::ToolFile { line: Some(line), .. }) => {
            assert!(line >= 1 && line <= text.lines().count().max(1) + 1, "line {line} is past the file");
        }
        Err(error) => assert!(error.to_string().contains("tools.toml"), "{error}"),
    }
});
