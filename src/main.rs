//! The `tandem` binary: parse the command line (with the configuration file), set up logging, run, map errors to
//! an exit code.

use std::process::ExitCode;

fn main() -> ExitCode {
    // Every variable Tandem reads is read now, once (the configuration file's place is one of them).
    tandem::settings::env::resolve();
    // Exit codes (docs/cli.md): 0 done, 1 error, 2 usage error, 3 a run stopped before finishing.
    let cli = match tandem::cli::parse() {
        Ok(cli) => cli,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(error.exit_code());
        }
    };
    if let Some(threads) = cli.threads().filter(|n| *n > 0) {
        // candle's gemm splits its work by RAYON_NUM_THREADS, read from the environment. It is set here, before
        // any thread exists, because changing the environment while other threads run is a data race.
        std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    }
    let default_level = match cli.verbose {
        0 => "warn",
        1 => "tandem=debug,info",
        _ => "tandem=trace,debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    // A TANDEM_CPU_ISA this CPU cannot run is refused before anything loads (the kernels would ignore it).
    match tandem::kernels::requested_level().and_then(|_| tandem::commands::run(cli)) {
        Ok(outcome) => {
            if let tandem::commands::Outcome::Stopped(why) = &outcome {
                eprintln!("stopped: {why}");
            }
            ExitCode::from(outcome.exit_code())
        }
        Err(error) => {
            // Every error's message already names its cause and what to do.
            eprintln!("error: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}
