//! `tandem bench …`: runs a benchmark and prints its report.

use crate::agent::rules::RuleSet;
use crate::bench::speed::{measure, SpeedSettings};
use crate::bench::suites::{self, PairsSettings, Suite};
use crate::cli::{BenchCommand, DraftsArgs, GrammarBenchArgs, PairsArgs, ServeBenchArgs, SpeedArgs, SuiteName};
use crate::commands::generate::model_engine;
use crate::progress::Reporter;
use crate::{Error, Result};

/// Runs a `bench` subcommand.
pub fn run(cmd: BenchCommand, reporter: &dyn Reporter) -> Result<()> {
    match cmd {
        BenchCommand::Speed(args) => speed(args, reporter),
        BenchCommand::Grammar(args) => grammar(args, reporter),
        BenchCommand::Drafts(args) => drafts(args, reporter),
        BenchCommand::Tasks(args) => suite(Suite::Tasks, &args.settings(), reporter),
        BenchCommand::Nestful(args) => {
            let settings = args.settings();
            if !args.retrieval_recall.is_empty() {
                return retrieval_recall(&settings, &args.retrieval_recall, reporter);
            }
            suite(Suite::Nestful, &settings, reporter)
        }
        BenchCommand::Bfcl(args) => suite(Suite::Bfcl, &args.settings(), reporter),
        BenchCommand::Pairs(args) => suites::pairs(&pairs_settings(&args), reporter),
        BenchCommand::Serve(args) => serve(args, reporter),
        BenchCommand::Rescore { dir, mend, rules_off, data } => {
            let rules = mend.map(|mend| RuleSet::new(mend, &rules_off)).transpose().map_err(crate::Error::Usage)?;
            suites::rescore(&dir, rules, data.as_deref())
        }
        BenchCommand::Merge { dirs, out } => crate::bench::merge::merge(&dirs, &out),
    }
}

fn suite(suite: Suite, settings: &crate::settings::SuiteSettings, reporter: &dyn Reporter) -> Result<()> {
    let pair = suites::pair_of(settings);
    suites::run_suite(suite, settings, &pair, reporter).map(|_| ())
}

/// Prints retrieval's gold-tool recall at each K as a Markdown table.
fn retrieval_recall(settings: &crate::settings::SuiteSettings, ks: &[usize], reporter: &dyn Reporter) -> Result<()> {
    let rows = crate::bench::nestful::runner::recall(settings, ks, reporter)?;
    let size = rows.first().map_or(0.0, |r| r.catalogue);
    println!("tool retrieval (BM25) on NESTFUL, --catalogue {} (mean catalogue {size:.1} tools)", settings.tools);
    println!("| K | gold-tool recall@K | samples with every gold tool in the K |");
    println!("| --- | --- | --- |");
    for row in rows {
        println!("| {} | {:.3} | {:.3} |", row.k, row.recall, row.all_gold);
    }
    Ok(())
}

fn pairs_settings(args: &PairsArgs) -> PairsSettings {
    PairsSettings {
        suite: match args.suite {
            SuiteName::Tasks => Suite::Tasks,
            SuiteName::Nestful => Suite::Nestful,
            SuiteName::Bfcl => Suite::Bfcl,
        },
        planners: args.planners.clone(),
        executors: args.executors.clone(),
        baselines: !args.no_baselines,
        suite_settings: args.suite_settings(),
    }
}

fn grammar(args: GrammarBenchArgs, reporter: &dyn Reporter) -> Result<()> {
    let engine = model_engine(&args.model)?;
    let path = engine.resolve(&args.model.model, reporter)?;
    let r = crate::bench::grammar::measure(&path, engine.device(), engine.load_options(), args.repeats)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r).map_err(Error::encode("the report"))?);
        return Ok(());
    }
    println!("model                 {}", args.model.model);
    println!("engine build          {:.0} ms (token trie + parser factory, once per tokenizer)", r.engine_build_ms);
    println!("schema compile        {:.2} ms (median of 5)", r.compile_ms);
    println!(
        "mask                  mean {:.0} µs, p99 {:.0} µs ({} masks on random walks)",
        r.mask_mean_us, r.mask_p99_us, r.masks_measured
    );
    println!(
        "plan, constrained     {} tokens in {:.2} s: {} forward passes, {} forced tokens, {} masks",
        r.constrained_tokens, r.constrained_s, r.constrained_forward_passes, r.forced_tokens, r.masks_in_generation
    );
    println!("same length, free     {:.2} s", r.unconstrained_s);
    println!("constrained ÷ free    {:.2}× wall time", r.wall_ratio);
    println!("plan                  {}", r.plan);
    Ok(())
}

fn drafts(args: DraftsArgs, reporter: &dyn Reporter) -> Result<()> {
    let engine = model_engine(&args.model)?;
    let path = engine.resolve(&args.model.model, reporter)?;
    let peer = args.vs_llamacpp.as_deref();
    let r =
        crate::bench::drafting::measure(&path, engine.device(), engine.load_options(), args.repeats, peer, reporter)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r).map_err(Error::encode("the report"))?);
        return Ok(());
    }
    println!("model     {} ({} threads)", args.model.model, r.threads);
    println!("drafts    {:?}", r.speculation);
    println!(
        "| goal | plan tokens | plain s | drafted s | narrowed s | passes plain → drafted (narrowed) | accepted / \
         drafted | same plan |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for g in &r.goals {
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {} → {} ({}) | {} / {} | {} |",
            g.goal,
            g.tokens,
            g.plain_s,
            g.drafted_s,
            g.narrowed_s,
            g.plain_passes,
            g.drafted_passes,
            g.narrowed_passes,
            g.accepted_tokens,
            g.drafted_tokens,
            if g.identical { "yes" } else { "NO" }
        );
    }
    println!(
        "decode    {:.1} tok/s plain, {:.1} tok/s drafted: {:.2}×; {:.1} tok/s narrowed: {:.2}× drafted (medians of {} \
         runs, prefill excluded)",
        r.plain_tok_s,
        r.drafted_tok_s,
        r.speedup,
        r.narrowed_tok_s,
        r.narrowed_speedup,
        args.repeats.max(1)
    );
    if let Some(peer) = r.llamacpp_tok_s {
        println!(
            "llama.cpp {:.1} tok/s plain decode of as many tokens at the same depths: drafted ÷ llama.cpp {:.2}×",
            peer,
            r.drafted_tok_s / peer
        );
        for g in &r.goals {
            let peer_s = g.llamacpp_s.unwrap_or(f64::NAN);
            println!("          {:.2} s for {} tokens after {} ({})", peer_s, g.tokens, g.prompt_tokens, g.goal);
        }
    }
    if r.goals.iter().any(|g| !g.identical) {
        println!("a plan marked NO differs where two tokens were nearly tied: batched passes round differently");
    }
    Ok(())
}

/// Our measurement and llama-bench's, alternating run by run (so drift on a noisy machine hits both), with
/// medians and ratios.
fn speed_vs_llamacpp(
    args: &SpeedArgs,
    path: &std::path::Path,
    device: &candle_core::Device,
    settings: &SpeedSettings,
    peer: &std::path::Path,
    reporter: &dyn Reporter,
) -> Result<()> {
    use crate::bench::llamacpp::{run_llama_bench, PeerDevice};
    use crate::bench::median;
    if !peer.is_file() {
        return Err(Error::Bench(format!(
            "no llama-bench at {}: build one with scripts/build-llama-bench.sh (prints its path)",
            peer.display()
        )));
    }
    let threads = candle_core::utils::get_num_threads();
    let peer_device = if device.is_cpu() { PeerDevice::Cpu } else { PeerDevice::Gpu };
    let once = SpeedSettings { repeats: 1, ..settings.clone() };
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..args.repeats.max(1) {
        ours.push(measure(path, device, &once, reporter)?);
        theirs.push(run_llama_bench(
            peer,
            path,
            peer_device,
            threads,
            settings.prefill_tokens,
            settings.decode_tokens,
            settings.decode_depth,
        )?);
    }
    let ours_of = |f: fn(&crate::bench::speed::SpeedReport) -> f64| median(&ours.iter().map(f).collect::<Vec<_>>());
    let theirs_of = |f: fn(&crate::bench::llamacpp::PeerRun) -> f64| median(&theirs.iter().map(f).collect::<Vec<_>>());
    let rows = [
        ("prefill", settings.prefill_tokens, ours_of(|r| r.prefill_tok_s), theirs_of(|r| r.prefill_tok_s)),
        ("decode", settings.decode_tokens, ours_of(|r| r.decode_tok_s), theirs_of(|r| r.decode_tok_s)),
    ];
    let depth = if settings.decode_depth > 0 { format!(" at depth {}", settings.decode_depth) } else { String::new() };
    let mib = |b: Option<u64>| b.map_or(f64::NAN, |b| b as f64 / (1024.0 * 1024.0));
    let our_rss = mib(ours.iter().filter_map(|r| r.peak_rss_bytes).max());
    let their_rss = mib(theirs.iter().filter_map(|r| r.peak_rss_bytes).max());
    if args.json {
        let json = serde_json::json!({ "tandem": ours, "llama_cpp": theirs, "threads": threads });
        println!("{}", serde_json::to_string_pretty(&json).map_err(Error::encode("the report"))?);
        return Ok(());
    }
    println!(
        "model {} ({:?}, {} threads, {} alternating runs each, medians)",
        args.model.model,
        args.model.compute.device,
        threads,
        args.repeats.max(1)
    );
    println!("| figure | tandem | llama.cpp | tandem ÷ llama.cpp |");
    println!("| --- | --- | --- | --- |");
    for (name, tokens, a, b) in rows {
        let at = if name == "decode" { depth.as_str() } else { "" };
        println!("| {name} tok/s ({tokens} tokens{at}) | {a:.1} | {b:.1} | {:.2}× |", a / b.max(1e-9));
    }
    println!("| peak RSS MiB | {our_rss:.0} | {their_rss:.0} | {:.2}× |", our_rss / their_rss);
    Ok(())
}

fn speed(args: SpeedArgs, reporter: &dyn Reporter) -> Result<()> {
    let engine = model_engine(&args.model)?;
    let path = engine.resolve(&args.model.model, reporter)?;
    let device = engine.device().clone();
    let settings = SpeedSettings {
        prefill_tokens: args.prefill_tokens,
        decode_tokens: args.decode_tokens,
        decode_depth: args.decode_depth,
        repeats: args.repeats,
        sequences: args.sequences.iter().map(|&n| usize::from(n)).collect(),
        load: engine.load_options().clone(),
        ..SpeedSettings::default()
    };
    if let Some(peer) = &args.vs_llamacpp {
        return speed_vs_llamacpp(&args, &path, &device, &settings, peer, reporter);
    }
    let report = measure(&path, &device, &settings, reporter)?;
    if args.json {
        let json = serde_json::to_string_pretty(&report).map_err(Error::encode("the report"))?;
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
    println!(
        "decode             {:.1} tok/s ({} tokens after {} cached)",
        report.decode_tok_s,
        report.decode_tokens,
        report.decode_depth.max(1)
    );
    for batched in &report.batched_decode {
        println!(
            "decode ×{:<3}        {:.1} tok/s over {} sequences at once ({:.2}× one sequence)",
            batched.sequences,
            batched.tok_s,
            batched.sequences,
            batched.tok_s / report.decode_tok_s.max(1e-9)
        );
    }
    println!(
        "prefix cache       {:.0} ms warm vs {:.0} ms cold to first logits ({} tokens, last {} new): {:.2}×",
        report.warm_prompt_ms,
        report.cold_prompt_ms,
        report.prefill_tokens,
        crate::bench::speed::FRESH_TOKENS,
        report.warm_prompt_ms / report.cold_prompt_ms.max(1e-9)
    );
    if let Some(rss) = report.peak_rss_bytes {
        println!("peak RSS           {:.0} MiB ({:.2}× file size)", mib(rss), rss as f64 / report.file_size as f64);
    }
    if !report.conversions.is_empty() {
        println!("converted at load  {}", report.conversions.join("; "));
    }
    println!("(medians of {} runs)", args.repeats.max(1));
    Ok(())
}

/// `tandem bench serve`: the model's file resolved (pulled if needed), the load run, the table printed.
fn serve(args: ServeBenchArgs, reporter: &dyn Reporter) -> Result<()> {
    use crate::bench::serve::workload::{Kind, Sampling};
    use crate::bench::serve::{run, ServeBenchSettings};
    let resolved = crate::store::ModelStore::open()?.resolve(&args.model, reporter)?;
    // tandem serve serves a file under its stem; llama-server is given the same name (--alias).
    let model_name = resolved.path.file_stem().map_or_else(|| args.model.clone(), |s| s.to_string_lossy().into_owned());
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let tandem = std::env::current_exe().map_err(|e| Error::io("finding the tandem binary to start", e))?;
    let settings = ServeBenchSettings {
        model: resolved.path,
        model_name,
        workloads: args.workload.iter().map(|name| Kind::parse(name)).collect::<Result<Vec<_>>>()?,
        samplings: args.sampling.iter().map(|name| Sampling::parse(name)).collect::<Result<Vec<_>>>()?,
        clients: args.clients.clone(),
        requests_per_client: args.requests,
        max_tokens: args.max_completion_tokens,
        threads,
        repeats: args.repeats,
        tandem,
        url: args.url.clone(),
        llama_server: args.vs_llama_server.clone(),
        out: args.out.clone(),
    };
    let report = run(&settings, reporter)?;
    println!("{}", std::fs::read_to_string(report.dir.join("summary.md")).unwrap_or_default());
    println!("run directory: {}", report.dir.display());
    Ok(())
}
