//! `tandem generate`: one prompt, one model, streamed to stdout.

use std::io::{Read, Write};
use std::path::PathBuf;

use candle_core::Device;

use crate::cli::{GenerateArgs, ModelArgs};
use crate::decode::constraint::ConstraintSpec;
use crate::decode::generate::TokenConstraint;
use crate::decode::{generate, GenerateRequest, Model, Sampling, Speculation};
use crate::llm::{select_device, ChatMessage, LoadOptions};
use crate::progress::Reporter;
use crate::store::ModelStore;
use crate::{Error, Result};

/// Applies the thread count, picks the device and resolves (pulling if needed) the model named by `args`.
pub fn prepare_model(args: &ModelArgs, reporter: &dyn Reporter) -> Result<(PathBuf, Device)> {
    crate::llm::device::set_threads(args.compute.threads);
    let device = select_device(args.compute.device)?;
    let resolved = ModelStore::open()?.resolve(&args.model, reporter)?;
    Ok((resolved.path, device))
}

/// Resolves (pulling if needed) and loads the model named by `args`.
pub fn load_model(args: &ModelArgs, reporter: &dyn Reporter) -> Result<Model> {
    let (path, device) = prepare_model(args, reporter)?;
    Model::load_with(&path, &device, &load_options(args), Speculation::from_setting(args.speculate.drafting()))
}

/// The load options the model flags ask for.
pub fn load_options(args: &ModelArgs) -> LoadOptions {
    LoadOptions { keep_tensor_types: args.keep_tensor_types, stack_projections: None, ..LoadOptions::default() }
}

/// Reads a constraint from the mutually exclusive flags.
fn constraint_spec(args: &GenerateArgs) -> Result<Option<ConstraintSpec>> {
    let read = |path: &std::path::Path| {
        std::fs::read_to_string(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))
    };
    if let Some(path) = &args.json_schema {
        let schema: serde_json::Value = serde_json::from_str(&read(path)?)
            .map_err(|e| Error::InvalidInput { path: path.clone(), message: format!("not valid JSON: {e}") })?;
        return Ok(Some(ConstraintSpec::JsonSchema(schema)));
    }
    if let Some(path) = &args.grammar {
        return Ok(Some(ConstraintSpec::Lark(read(path)?)));
    }
    Ok(args.regex.clone().map(ConstraintSpec::Regex))
}

/// Runs `tandem generate`.
pub fn run(args: GenerateArgs, reporter: &dyn Reporter) -> Result<()> {
    let prompt = if args.prompt == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| Error::io("reading the prompt from stdin", e))?;
        text
    } else {
        args.prompt.clone()
    };
    let spec = constraint_spec(&args)?;
    let mut model = load_model(&args.model, reporter)?;
    let text = if args.chat {
        let template = model.chat_template.as_ref().ok_or_else(|| {
            Error::Model(format!(
                "{} has no chat template (a base model?): drop --chat to complete raw text",
                model.info.path.display()
            ))
        })?;
        let mut messages = Vec::new();
        if let Some(system) = &args.system {
            messages.push(ChatMessage::system(system));
        }
        messages.push(ChatMessage::user(&prompt));
        template.render(&messages, None, true)?
    } else {
        prompt
    };
    let add_bos = model.tokenizer.add_bos_by_default();
    let tokens = model.tokenizer.encode(&text, add_bos)?;
    let mut matcher = match &spec {
        Some(spec) => Some(model.grammar_engine()?.matcher(spec)?),
        None => None,
    };
    let request = GenerateRequest {
        prompt: tokens,
        max_tokens: args.max_tokens,
        sampling: Sampling::from_temperature(args.temperature, args.top_k, args.top_p),
        seed: args.seed,
        stop_tokens: Vec::new(),
        constraint: matcher.as_mut().map(|m| m as &mut dyn TokenConstraint),
        speculation: model.speculation,
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut write_error = None;
    let mut streamed = false;
    let result = generate(&mut model, request, &mut |piece| {
        streamed = true;
        if write_error.is_none() {
            if let Err(e) = out.write_all(piece.as_bytes()).and_then(|_| out.flush()) {
                write_error = Some(e);
            }
        }
    });
    if result.is_err() && streamed {
        // End the partial line so the error message starts on its own.
        let _ = writeln!(out).and_then(|_| out.flush());
    }
    let generation = result?;
    if let Some(e) = write_error {
        return Err(Error::io("writing to stdout", e));
    }
    let _ = writeln!(out).and_then(|_| out.flush());
    if args.timings {
        let t = &generation.timings;
        eprintln!(
            "load {:.2} s | prefill {} tok in {:.2} s ({:.1} tok/s) | decode {} tok in {:.2} s ({:.1} tok/s) | stop: {:?}",
            model.info.load_time.as_secs_f64(),
            t.prompt_tokens,
            t.prefill.as_secs_f64(),
            t.prefill_tok_s(),
            t.generated_tokens,
            t.decode.as_secs_f64(),
            t.decode_tok_s(),
            generation.stop
        );
    }
    Ok(())
}
