//! Tool retrieval (`--tools-top-k`): BM25 ranks the right tool first on small catalogues, handles K beyond the
//! catalogue and empty goals, and the planner's prompt and grammar name only the tools it selected, while the run
//! still validates and executes with every tool.

use std::sync::Arc;

use serde_json::{json, Value};
use tandem::agent::plan::planner::system_prompt_with;
use tandem::agent::plan::schema::plan_json_schema;
use tandem::agent::plan::tool_lines::ToolListing;
use tandem::agent::{Agent, AutoApprove, EventLog, NoObserver, Plan, RunParts, RunSettings, RunsDir, StopReason};
use tandem::progress::SilentReporter;
use tandem::tools::retrieval::{planning_selection, restrict, select, ToolIndex};
use tandem::tools::{DeclaredTool, Llm, ToolContext, ToolRegistry, ToolSpec, Workspace};

use crate::common::runs::{event_names, Scratch};

fn declared(name: &str, description: &str, args: Value) -> DeclaredTool {
    DeclaredTool {
        name: name.into(),
        description: description.into(),
        args_schema: json!({"type": "object", "properties": args}),
        output_schema: None,
    }
}

fn spec(name: &str, description: &str, args: Value) -> ToolSpec {
    ToolSpec::of(&declared(name, description, args))
}

/// A travel-and-money catalogue; names as real sources spell them (dots, camelCase, slashes).
fn travel_specs() -> Vec<ToolSpec> {
    vec![
        spec(
            "Hotels.SearchHouse",
            "Find a house to stay in at a destination",
            json!({"where_to": {"type": "string", "description": "city of the stay"}, "number_of_adults": {"type": "integer"}}),
        ),
        spec(
            "Flights.SearchOnewayFlight",
            "Search for one-way flights between two cities",
            json!({"origin_city": {"type": "string"}, "destination_city": {"type": "string"}}),
        ),
        spec(
            "WeatherAPI.com_forecast",
            "Weather forecast for a location for the coming days",
            json!({"q": {"type": "string", "description": "city name"}, "days": {"type": "integer"}}),
        ),
        spec(
            "banking/convertCurrency",
            "Convert an amount of money from one currency to another",
            json!({"amount": {"type": "number"}, "from": {"type": "string"}, "to": {"type": "string"}}),
        ),
        spec(
            "Restaurants.ReserveRestaurant",
            "Book a table at a restaurant",
            json!({"restaurant_name": {"type": "string"}, "time": {"type": "string"}}),
        ),
    ]
}

#[test]
fn bm25_ranks_the_matching_tool_first_on_dotted_and_camel_case_names() {
    let specs = travel_specs();
    let index = ToolIndex::new(&specs);
    let cases = [
        ("Search for a house to stay in Paris for 2 adults", "Hotels.SearchHouse"),
        ("I need a one-way flight from Oslo to Rome", "Flights.SearchOnewayFlight"),
        ("What will the weather be like in Lima in 3 days?", "WeatherAPI.com_forecast"),
        ("How much is 250 euros in dollars? Convert the currency.", "banking/convertCurrency"),
        ("Reserve a table at Luigi's for 8pm", "Restaurants.ReserveRestaurant"),
    ];
    for (goal, want) in cases {
        let top = index.top(goal, 1);
        assert_eq!(top, [want], "goal {goal:?}: scores {:?}", index.scores(goal));
    }
}

fn registry_of(specs: &[(&str, &str)]) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for (name, description) in specs {
        registry.register(declared(name, description, json!({"text": {"type": "string"}}))).unwrap();
    }
    registry
}

#[test]
fn k_beyond_the_catalogue_returns_every_tool_and_an_empty_goal_keeps_registration_order() {
    let registry = registry_of(&[
        ("get_stock_price", "The current price of a stock"),
        ("translate_text", "Translate text into another language"),
        ("send_email", "Send an email to a recipient"),
    ]);
    let all = select("translate this email", &registry, 10);
    assert_eq!(all.len(), 3, "{all:?}");
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(sorted, ["get_stock_price", "send_email", "translate_text"]);
    // No words to match (nothing, or only stop words and punctuation): the first k tools, in registration order.
    assert_eq!(select("", &registry, 2), ["get_stock_price", "translate_text"]);
    assert_eq!(select("the of ? !", &registry, 2), ["get_stock_price", "translate_text"]);
    // k = 0 is "off", and a catalogue no larger than k needs no selection.
    assert!(planning_selection("translate", &registry, 0).unwrap().is_none());
    assert!(planning_selection("translate", &registry, 3).unwrap().is_none());
    assert_eq!(select("translate a text", &registry, 1), ["translate_text"]);
}

/// Twelve declared tools and the built-in `llm`.
fn big_registry() -> ToolRegistry {
    let mut registry = registry_of(&[
        ("get_stock_price", "The current price of a stock"),
        ("translate_text", "Translate text into another language"),
        ("send_email", "Send an email to a recipient"),
        ("calculate_bmi", "Body mass index from weight and height"),
        ("search_recipes", "Find recipes by ingredients"),
        ("get_weather", "The current weather of a city"),
        ("create_todo", "Create a todo item"),
        ("get_news", "Latest news headlines of a category"),
        ("convert_currency", "Convert an amount between currencies"),
        ("play_music", "Play a song by an artist"),
        ("book_flight", "Book a flight between two cities"),
        ("calculate_tip", "The tip for a bill and a tip percentage"),
    ]);
    registry.register(Llm).unwrap();
    registry
}

#[test]
fn the_planner_prompt_and_grammar_name_only_the_selected_tools() {
    let registry = big_registry();
    let goal = "Convert 100 dollars to euros, then translate the result into French";
    let selection = planning_selection(goal, &registry, 2).unwrap().expect("13 tools > 2: a selection");
    let mut best = selection.tools[..2].to_vec();
    best.sort();
    assert_eq!(best, ["convert_currency", "translate_text"], "{:?}", selection.tools);
    assert_eq!(selection.tools.last().map(String::as_str), Some("llm"), "llm is always kept");
    assert_eq!(selection.registry.names(), ["translate_text", "convert_currency", "llm"], "registration order");

    let prompt = system_prompt_with(&selection.registry, ToolListing::Compact).unwrap();
    let schema = plan_json_schema(&selection.registry).to_string();
    for name in registry.names() {
        let shown = selection.tools.iter().any(|t| t == name);
        assert_eq!(prompt.contains(&format!("- {name}(")), shown, "{name} in the prompt");
        assert_eq!(schema.contains(&format!("\"const\":\"{name}\"")), shown, "{name} in the grammar");
    }
    // The full registry's prompt still names them all: only the planning view is restricted.
    assert!(system_prompt_with(&registry, ToolListing::Compact).unwrap().contains("- play_music("));
    assert_eq!(restrict(&registry, &["play_music".into(), "nope".into()]).unwrap().names(), ["play_music"]);
}

fn plan(value: Value) -> Plan {
    serde_json::from_value(value).expect("plan JSON")
}

#[test]
fn a_run_with_top_k_logs_the_selection_and_still_executes_with_every_tool() {
    let scratch = Scratch::new();
    let context = ToolContext::new(Workspace::new(scratch.workspace()).unwrap());
    let mut registry = ToolRegistry::builtins(&context);
    for (name, description) in [("play_music", "Play a song by an artist"), ("get_news", "Latest news headlines")] {
        registry.register_arc(Arc::new(declared(name, description, json!({})))).unwrap();
    }
    let mut settings = RunSettings::new("no-planner-needed", "no-executor-needed", &scratch.workspace());
    settings.tools_top_k = 1;
    settings.budgets.max_replans = 0;
    let (_, dir) = RunsDir::new(scratch.path("runs")).create_run().unwrap();
    let mut models = tandem::engine::Engine::new(Default::default(), Default::default()).unwrap().models(
        "none",
        "none",
        &SilentReporter,
    );
    let goal = "Evaluate the arithmetic expression 6*7";
    let mut approver = AutoApprove;
    let agent = Agent::start(
        goal,
        settings,
        EventLog::create(&dir).unwrap(),
        RunParts {
            registry: &registry,
            context: &context,
            models: &mut models,
            approver: &mut approver,
            observer: &NoObserver,
        },
    )
    .unwrap();
    // A given plan may use a tool the planner was not shown: validation and execution know every tool.
    let given = plan(json!({"goal": goal, "steps": [
        {"id": "s1", "tool": "list_dir", "args": {"path": "."}},
        {"id": "s2", "tool": "calculator", "args": {"expression": "6*7"}}
    ]}));
    let outcome = agent.run(Some(given)).unwrap();
    assert_eq!(outcome.stop, StopReason::Done, "{}", outcome.detail);
    let events = scratch.latest_events();
    assert_eq!(&event_names(&events)[..2], ["run_started", "tools_selected"]);
    let selected = &events[1];
    assert_eq!(selected["top_k"], 1);
    assert_eq!(selected["offered"], registry.len());
    assert_eq!(selected["tools"], json!(["calculator", "llm"]), "{selected}");
    assert_eq!(events[0]["settings"]["tools_top_k"], 1);
}

#[test]
fn old_run_logs_without_top_k_still_read() {
    let settings = RunSettings::new("p", "e", std::path::Path::new("/tmp"));
    let mut value = serde_json::to_value(&settings).unwrap();
    value.as_object_mut().unwrap().remove("tools_top_k");
    let read: RunSettings = serde_json::from_value(value).unwrap();
    assert_eq!(read.tools_top_k, 0);
}
