//! Metadata readers: every failure names the key (and the array element).

use std::collections::HashMap;

use candle_core::quantized::gguf_file::Value;

use super::TokenizerError;

fn get<'a>(md: &'a HashMap<String, Value>, key: &str) -> Result<&'a Value, TokenizerError> {
    md.get(key).ok_or_else(|| TokenizerError::MissingKey(key.to_string()))
}

fn wrong(key: &str, index: Option<usize>, expected: &'static str) -> TokenizerError {
    TokenizerError::WrongType { key: key.to_string(), index, expected }
}

pub(super) fn string_value<'a>(md: &'a HashMap<String, Value>, key: &str) -> Result<Option<&'a str>, TokenizerError> {
    match md.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(wrong(key, None, "a string")),
    }
}

fn array<'a>(md: &'a HashMap<String, Value>, key: &str, expected: &'static str) -> Result<&'a [Value], TokenizerError> {
    match get(md, key)? {
        Value::Array(items) => Ok(items),
        _ => Err(wrong(key, None, expected)),
    }
}

pub(super) fn string_array(md: &HashMap<String, Value>, key: &str) -> Result<Vec<String>, TokenizerError> {
    array(md, key, "an array of strings")?
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::String(s) => Ok(s.clone()),
            _ => Err(wrong(key, Some(i), "a string")),
        })
        .collect()
}

pub(super) fn number_array<T>(
    md: &HashMap<String, Value>,
    key: &str,
    expected: &'static str,
    convert: impl Fn(&Value) -> Option<T>,
) -> Result<Vec<T>, TokenizerError> {
    array(md, key, "an array of numbers")?
        .iter()
        .enumerate()
        .map(|(i, v)| convert(v).ok_or_else(|| wrong(key, Some(i), expected)))
        .collect()
}

/// Any integer type, as converters write ids and types with different widths.
fn as_i64(v: &Value) -> Option<i64> {
    match *v {
        Value::U8(x) => Some(x.into()),
        Value::I8(x) => Some(x.into()),
        Value::U16(x) => Some(x.into()),
        Value::I16(x) => Some(x.into()),
        Value::U32(x) => Some(x.into()),
        Value::I32(x) => Some(x.into()),
        Value::U64(x) => i64::try_from(x).ok(),
        Value::I64(x) => Some(x),
        _ => None,
    }
}

pub(super) fn as_i32(v: &Value) -> Option<i32> {
    as_i64(v).and_then(|x| i32::try_from(x).ok())
}

pub(super) fn as_f32(v: &Value) -> Option<f32> {
    match *v {
        Value::F32(x) => Some(x),
        Value::F64(x) => Some(x as f32),
        _ => as_i64(v).map(|x| x as f32),
    }
}

pub(super) fn optional_bool(md: &HashMap<String, Value>, key: &str) -> Result<Option<bool>, TokenizerError> {
    match md.get(key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(wrong(key, None, "a boolean")),
    }
}

/// A special token id. Negative values mean "none" (some converters write -1).
pub(super) fn optional_id(md: &HashMap<String, Value>, key: &str, vocab: usize) -> Result<Option<u32>, TokenizerError> {
    let Some(value) = md.get(key) else {
        return Ok(None);
    };
    let id = as_i64(value).ok_or_else(|| wrong(key, None, "an integer token id"))?;
    if id < 0 {
        return Ok(None);
    }
    match u32::try_from(id) {
        Ok(id) if (id as usize) < vocab => Ok(Some(id)),
        _ => Err(TokenizerError::IdOutOfRange { key: key.to_string(), id: id as u64, vocab }),
    }
}
