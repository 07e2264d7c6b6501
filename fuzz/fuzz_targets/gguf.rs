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

/// libFuzzer's panic hook aborts on every panic, even one the code under test catches. `GgufFile::open` catches
/// the panics of candle's header reader and returns them as bad-header errors (its documented behaviour), so the
/// hook here reports a panic without aborting: one that escapes still fails the input (libfuzzer-sys aborts when
/// the target unwinds), one that is caught becomes the error it is turned into.
fn report_panics_without_aborting() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| std::panic::set_hook(Box::new(|info| eprintln!("panic (caught or not): {info}"))));
}

fuzz_target!(|data: &[u8]| {
    report_panics_without_aborting();
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
