//! `tandem bench …`: runs a benchmark and prints its report.

use crate::bench::speed::{measure, SpeedSettings};
use crate::cli::{BenchCommand, SpeedArgs};
use crate::llm::select_device;
use crate::progress::Reporter;
use crate::store::ModelStore;
use crate::{Error, Result};

/// Runs a `bench` subcommand.
pub fn run(cmd: BenchCommand, reporter: &dyn Reporter) -> Result<()> {
    match cmd {
        BenchCommand::Speed(args) => speed(args, reporter),
    }
}

fn speed(args: SpeedArgs, reporter: &dyn Reporter) -> Result<()> {
    crate::llm::device::set_threads(args.model.threads);
    let device = select_device(args.model.device)?;
    let resolved = ModelStore::open()?.resolve(&args.model.model, reporter)?;
    let settings = SpeedSettings {
        prefill_tokens: args.prefill_tokens,
        decode_tokens: args.decode_tokens,
        repeats: args.repeats,
        load: args.model.load_options(),
        ..SpeedSettings::default()
    };
    let report = measure(&resolved.path, &device, &settings, reporter)?;
    if args.json {
        let json = serde_json::to_string_pretty(&report).map_err(|e| Error::Usage(e.to_string()))?;
        println!("{json}");
        return Ok(());
    }
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!("model              {}", args.model.model);
    println!("file               {} ({:.0} MiB)", report.model, mib(report.file_size));
    println!("threads            {}", report.threads);
    println!("load               {:.2} s", report.load_s);
    println!("load + 1st token   {:.2} s (100-token prompt)", report.load_and_first_token_s);
    println!("prefill            {:.1} tok/s ({} tokens)", report.prefill_tok_s, report.prefill_tokens);
    println!("decode             {:.1} tok/s ({} tokens)", report.decode_tok_s, report.decode_tokens);
    if let Some(rss) = report.peak_rss_bytes {
        println!("peak RSS           {:.0} MiB ({:.2}× file size)", mib(rss), rss as f64 / report.file_size as f64);
    }
    if !report.conversions.is_empty() {
        println!("converted at load  {}", report.conversions.join("; "));
    }
    println!("(medians of {} runs)", args.repeats.max(1));
    Ok(())
}
