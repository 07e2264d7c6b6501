//! The GGUF reader: any bytes are opened as a model file (header, metadata, tensor index) and every tensor listed
//! is read; errors must name the file, nothing may panic or read past the map.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tandem::llm::gguf::GgufFile;

/// One file per process, rewritten for each input (in memory where `/dev/shm` exists).
fn path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        dir.join(format!("tandem-fuzz-{}.gguf", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let path = path();
    std::fs::write(path, data).unwrap();
    match GgufFile::open(path) {
        Ok(file) => {
            let _ = file.architecture();
            let names: Vec<String> = file.content.tensor_infos.keys().cloned().collect();
            for name in names {
                if let Err(error) = file.tensor(&name, &candle_core::Device::Cpu) {
                    assert!(error.to_string().contains("tandem-fuzz-"), "{error}");
                }
                let _ = file.tensor_layout(&name);
            }
        }
        Err(error) => assert!(error.to_string().contains("tandem-fuzz-"), "{error}"),
    }
});
