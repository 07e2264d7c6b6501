//! What `tandem models list` shows about a model file, read from its GGUF header: the architecture, the
//! quantization (`general.file_type`, named as llama.cpp names it), the context length the file was trained for,
//! and the size on disk.

use std::path::Path;

use candle_core::quantized::gguf_file::{Content, Value};

/// The header facts of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// `general.architecture`.
    pub architecture: String,
    /// The quantization: `general.file_type`'s name, or `type N` for a number we do not name.
    pub quantization: String,
    /// `<architecture>.context_length`, when present.
    pub context_length: Option<u64>,
    /// Bytes on disk.
    pub size: u64,
}

/// llama.cpp's names for `general.file_type` (its `llama_ftype` numbers).
fn file_type_name(file_type: u64) -> Option<&'static str> {
    Some(match file_type {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4",
        _ => return None,
    })
}

fn unsigned(value: Option<&Value>) -> Option<u64> {
    match *value? {
        Value::U8(x) => Some(x.into()),
        Value::U16(x) => Some(x.into()),
        Value::U32(x) => Some(x.into()),
        Value::U64(x) => Some(x),
        Value::I8(x) => u64::try_from(x).ok(),
        Value::I16(x) => u64::try_from(x).ok(),
        Value::I32(x) => u64::try_from(x).ok(),
        Value::I64(x) => u64::try_from(x).ok(),
        _ => None,
    }
}

/// Reads the header of `path`; `Err` says why the file is not a readable GGUF.
pub fn read(path: &Path) -> Result<ModelInfo, String> {
    let mut file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let size = file.metadata().map_err(|e| e.to_string())?.len();
    let content = Content::read(&mut file).map_err(|e| format!("not a readable GGUF file: {e}"))?;
    let md = &content.metadata;
    let architecture = match md.get("general.architecture") {
        Some(Value::String(a)) => a.clone(),
        _ => "?".to_string(),
    };
    let quantization = match unsigned(md.get("general.file_type")) {
        Some(t) => file_type_name(t).map(str::to_string).unwrap_or_else(|| format!("type {t}")),
        None => "?".to_string(),
    };
    let context_length = unsigned(md.get(&format!("{architecture}.context_length")));
    Ok(ModelInfo { architecture, quantization, context_length, size })
}

#[cfg(test)]
mod tests {
    use super::file_type_name;

    #[test]
    fn file_types_are_named_as_llama_cpp_names_them() {
        assert_eq!(file_type_name(15), Some("Q4_K_M"));
        assert_eq!(file_type_name(3), Some("Q4_1"));
        assert_eq!(file_type_name(4), None, "Q4_1 with F16 output: retired in llama.cpp");
    }
}
