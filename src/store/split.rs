//! The names llama.cpp's `gguf-split` gives the parts of a split model (`NAME-00002-of-00003.gguf`): the loader
//! finds a part's siblings by them, and the store keeps, pulls and copies every part under them.

/// A part's file name taken apart: `STEM-00002-of-00003.gguf` is part 2 (from 1) of 3 of `STEM`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitName {
    /// The name before `-00002-of-00003.gguf`.
    pub stem: String,
    /// Which part, from 1.
    pub part: usize,
    /// How many parts.
    pub count: usize,
}

impl SplitName {
    /// The name of part `part` (from 1) of the same model.
    pub fn sibling(&self, part: usize) -> String {
        part_name(&self.stem, part, self.count)
    }

    /// Every part's name, the first first.
    pub fn all(&self) -> Vec<String> {
        (1..=self.count).map(|part| self.sibling(part)).collect()
    }
}

/// `STEM-0000K-of-0000N.gguf`, as gguf-split writes it (five digits each, or more where the count needs them).
pub fn part_name(stem: &str, part: usize, count: usize) -> String {
    format!("{stem}-{part:05}-of-{count:05}.gguf")
}

/// The parts of `file_name` when it is named as a part of a split model of two or more parts (`.gguf` in any
/// case); `None` for any other name.
pub fn parse(file_name: &str) -> Option<SplitName> {
    let lower = file_name.to_ascii_lowercase();
    let base = &file_name[..lower.strip_suffix(".gguf")?.len()];
    let (rest, count) = base.rsplit_once("-of-")?;
    let (stem, part) = rest.rsplit_once('-')?;
    let number = |digits: &str| {
        (digits.len() >= 5 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse::<usize>().ok())?
    };
    let (part, count) = (number(part)?, number(count)?);
    (!stem.is_empty() && count >= 2 && (1..=count).contains(&part)).then(|| SplitName {
        stem: stem.to_string(),
        part,
        count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_names_round_trip_and_other_names_are_whole_files() {
        let name = parse("Llama-3.1-70B-Q4_K_M-00002-of-00003.gguf").unwrap();
        assert_eq!((name.stem.as_str(), name.part, name.count), ("Llama-3.1-70B-Q4_K_M", 2, 3));
        assert_eq!(name.sibling(1), "Llama-3.1-70B-Q4_K_M-00001-of-00003.gguf");
        assert_eq!(name.all().len(), 3);
        assert_eq!(parse("x-00001-of-00002.GGUF").map(|n| n.count), Some(2));
        for whole in [
            "model.gguf",
            "x-00001-of-00001.gguf",
            "x-00004-of-00003.gguf",
            "x-00000-of-00003.gguf",
            "x-1-of-3.gguf",
            "-00001-of-00002.gguf",
            "x-00001-of-00002.bin",
            "x-0000a-of-00002.gguf",
        ] {
            assert_eq!(parse(whole), None, "{whole}");
        }
    }
}
