//! Rule `time-zones` (mend, general). Mends a time zone the plan passes under a name the time zone database does not have, to a parameter whose
//! schema asks for the database's names (its description says "IANA", or shows one as an example):
//! `America/Honolulu` → `Pacific/Honolulu` (the place the value names has one zone), `Asia/Makati` for "the time
//! in Manila" → `Asia/Manila` (the value names no zone's place, and Manila is the one place the goal writes that
//! no other zone argument of the call takes).
//!
//! Why: the 1.5B planner writes a zone name from the city and a guessed region; a tool that keys on the database
//! refuses it, and the repair and every replan wrote the same name again (tasks-mcp, docs/benchmarks.md). The
//! names are a published standard, so code, not the model, maps a place to its zone, and only where the value as
//! written cannot be one.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::{Map, Value};

use super::parameter_description;
use super::support::accents_off;
use crate::agent::plan::refs::references_in;
use crate::agent::plan::Plan;
use crate::tools::{ToolRegistry, ToolSpec};

/// The database's regions, in the order a name is preferred where several zones share a place
/// (`Europe/Istanbul` and `Asia/Istanbul`: the one in the region the value named, else the first listed here).
const REGIONS: &[&str] =
    &["Europe", "Asia", "America", "Africa", "Australia", "Pacific", "Atlantic", "Indian", "Antarctica", "Arctic"];

/// Rewrites each top-level text argument of a zone parameter that is not a zone name of the database into the
/// zone of the place it names, else of the one place the goal writes with a capital that no other zone argument of
/// the call takes, else into the zone the same name became in another step of the plan (one name is one place
/// throughout a plan). Returns one line per mend (`s1: target_timezone "Asia/Makati" → "Asia/Manila" (…)`).
pub fn mend_time_zones(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    let places = places_written(&plan.goal);
    let mut unknown: Vec<Unknown> = Vec::new();
    for (index, step) in plan.steps.iter().enumerate() {
        let Some(spec) = registry.spec(&step.tool) else { continue };
        let zone_parameters = zone_parameters(&step.args, spec);
        for name in &zone_parameters {
            let Some(written) = step.args[name].as_str().map(str::trim) else { continue };
            if is_zone(written) || !references_in(&step.args[name]).is_empty() {
                continue;
            }
            let taken = places_taken(&step.args, &zone_parameters, name);
            let found = zone_for(written, &places, &taken);
            unknown.push(Unknown { index, name: name.clone(), written: written.to_string(), found });
        }
    }
    let decided: Vec<(String, String, String)> = unknown
        .iter()
        .filter_map(|u| {
            u.found.as_ref().map(|(zone, _)| (u.written.clone(), zone.clone(), plan.steps[u.index].id.clone()))
        })
        .collect();
    let mut lines = Vec::new();
    for Unknown { index, name, written, found } in unknown {
        let found = found.or_else(|| {
            let mut same = decided.iter().filter(|(w, _, _)| *w == written);
            let (_, zone, step) = same.next()?;
            let one_zone = same.all(|(_, other, _)| other == zone);
            one_zone.then(|| (zone.clone(), format!("not a time zone name; {step} passes it as {zone}")))
        });
        let Some((zone, why)) = found else { continue };
        let step = &mut plan.steps[index];
        lines.push(format!("{}: {name} {written:?} → {zone:?} ({why})", step.id));
        step.args.insert(name, Value::String(zone));
    }
    lines
}

/// The zone a name the database lacks stands for, and why: the zone of the place it names, else of the one place
/// of the goal (`places`) that the call's other zone arguments (`taken`, by place) leave free.
fn zone_for(written: &str, places: &[(String, String)], taken: &[String]) -> Option<(String, String)> {
    if let Some(zone) = zone_of_place(written) {
        let why = format!("not a time zone name; {} is in {zone}", place_of(written));
        return Some((zone, why));
    }
    let (zone, as_written) = one_free_place(places, taken)?;
    let why = format!("not a time zone name; the goal's {as_written} is in {zone}");
    Some((zone, why))
}

/// The zone of the one place of `places` (key, as written) that `taken` (places by key) leaves free, with the place
/// as written; none where no place or several are free.
fn one_free_place(places: &[(String, String)], taken: &[String]) -> Option<(String, String)> {
    let free: Vec<&(String, String)> = places.iter().filter(|(key, _)| !taken.contains(key)).collect();
    let [(key, as_written)] = free.as_slice() else { return None };
    Some((zone_of_place(key)?, as_written.clone()))
}

/// The arguments of a call, by name, whose parameters take the database's zone names.
fn zone_parameters(args: &Map<String, Value>, spec: &ToolSpec) -> Vec<String> {
    args.keys().filter(|name| takes_zone_names(name, parameter_description(spec, name))).cloned().collect()
}

/// The places (by key) the call's zone arguments other than `name` pass.
fn places_taken(args: &Map<String, Value>, zone_parameters: &[String], name: &str) -> Vec<String> {
    zone_parameters
        .iter()
        .filter(|other| *other != name)
        .filter_map(|other| args[other].as_str().map(place_key))
        .collect()
}

/// A zone argument the database lacks: its step's index, the parameter, the value as written, and the zone with why
/// where the call alone decides it.
struct Unknown {
    index: usize,
    name: String,
    written: String,
    found: Option<(String, String)>,
}

/// Whether a parameter takes the time zone database's names: its name or description speaks of a zone (`tz`,
/// `timezone`, "time zone"), and its description says "IANA" or "tz database", or shows a database name as an
/// example (`'America/New_York'`).
fn takes_zone_names(name: &str, description: &str) -> bool {
    let lower = description.to_lowercase();
    let name = name.to_lowercase();
    let speaks_of_zones = name.contains("zone") || name == "tz" || lower.contains("zone");
    speaks_of_zones
        && (lower.contains("iana")
            || lower.contains("tz database")
            || lower.contains("tzdb")
            || description
                .split(|c: char| !(c.is_ascii_alphanumeric() || "/_+-".contains(c)))
                .any(|word| word.contains('/') && is_zone(word)))
}

/// The database's zone names by the key of their place (`honolulu` → `Pacific/Honolulu`), built on first use.
fn zones_by_place() -> &'static BTreeMap<String, Vec<&'static str>> {
    static BY_PLACE: OnceLock<BTreeMap<String, Vec<&'static str>>> = OnceLock::new();
    BY_PLACE.get_or_init(|| {
        let mut by_place: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
        for tz in chrono_tz::TZ_VARIANTS {
            by_place.entry(place_key(tz.name())).or_default().push(tz.name());
        }
        by_place
    })
}

/// Whether `text` is a zone name of the database, exactly as written.
fn is_zone(text: &str) -> bool {
    text.parse::<chrono_tz::Tz>().is_ok()
}

/// The place part of a zone name or a place as written (`America/Argentina/Buenos_Aires` → `Buenos_Aires`).
fn place_of(text: &str) -> &str {
    text.rsplit('/').next().unwrap_or(text).trim()
}

/// The key places are matched on: the place part, lowercase, without accents, underscores as spaces
/// (`Bogotá` and `America/Bogota` → `bogota`).
fn place_key(text: &str) -> String {
    accents_off(place_of(text)).replace('_', " ").to_lowercase()
}

/// The zone of the place a text names (`America/Honolulu`, `Honolulu`, `asia/tokyo`), where the database has one;
/// where several zones share the place, the one in the region the text names, else the first region in
/// [`REGIONS`].
fn zone_of_place(text: &str) -> Option<String> {
    let candidates = zones_by_place().get(&place_key(text))?;
    let region = text.split('/').next().unwrap_or("").to_lowercase();
    let in_region = |c: &&&str| c.split('/').next().is_some_and(|r| r.to_lowercase() == region);
    let rank = |c: &&&str| {
        let first = c.split('/').next().unwrap_or("");
        (!c.contains('/'), REGIONS.iter().position(|r| *r == first).unwrap_or(REGIONS.len()))
    };
    candidates.iter().find(in_region).or_else(|| candidates.iter().min_by_key(rank)).map(|zone| zone.to_string())
}

/// The places the goal writes with a capital that the database has a zone for, as (key, as written), in the
/// goal's order: "São Paulo" → (`sao paulo`, "São Paulo"); a place of several words is matched whole.
fn places_written(goal: &str) -> Vec<(String, String)> {
    let words: Vec<&str> = goal.split(|c: char| !c.is_alphabetic()).filter(|w| !w.is_empty()).collect();
    let mut found: Vec<(String, String)> = Vec::new();
    let mut at = 0;
    while at < words.len() {
        let longest = (1..=3.min(words.len() - at)).rev().find_map(|n| {
            let phrase = &words[at..at + n];
            let key = accents_off(&phrase.join(" ")).to_lowercase();
            let named = phrase.iter().all(|w| w.starts_with(char::is_uppercase));
            (named && zones_by_place().contains_key(&key)).then(|| (n, key, phrase.join(" ")))
        });
        match longest {
            Some((n, key, as_written)) => {
                if !found.iter().any(|(k, _)| *k == key) {
                    found.push((key, as_written));
                }
                at += n;
            }
            None => at += 1,
        }
    }
    found
}

/// Rule `time-zones` (mend, general).
pub struct TimeZones;

impl super::Rule for TimeZones {
    fn about(&self) -> super::About {
        super::About {
            name: "time-zones",
            stage: super::Stage::Mend,
            profile: super::Profile::General,
            keys_on: "a zone argument the time zone database does not have, to a parameter whose schema names the database or shows one of its names: the zone of the place it names",
        }
    }

    fn mend(&self, plan: &mut Plan, tools: &ToolRegistry, _seen: &str) -> Vec<String> {
        mend_time_zones(plan, tools)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_parameters_are_known_by_their_schema() {
        let time_server = "IANA timezone name (e.g., 'America/New_York', 'Europe/London').";
        assert!(takes_zone_names("source_timezone", time_server));
        assert!(takes_zone_names("tz", "Zone, like Europe/Paris"));
        assert!(!takes_zone_names("city", "The city"), "no zone in its name or description");
        assert!(!takes_zone_names("timezone", "The timezone, as an offset like +02:00"), "no database name asked");
    }

    #[test]
    fn places_map_to_their_zones() {
        assert_eq!(zone_of_place("America/Honolulu").as_deref(), Some("Pacific/Honolulu"));
        assert_eq!(zone_of_place("Bogotá").as_deref(), Some("America/Bogota"));
        assert_eq!(zone_of_place("asia/tokyo").as_deref(), Some("Asia/Tokyo"));
        assert_eq!(zone_of_place("Asia/Istanbul").as_deref(), Some("Asia/Istanbul"), "the value's region first");
        assert_eq!(zone_of_place("Istanbul").as_deref(), Some("Europe/Istanbul"));
        assert_eq!(zone_of_place("Asia/Makati"), None);
        assert!(is_zone("Etc/UTC") && is_zone("UTC") && !is_zone("America/Honolulu"));
    }

    #[test]
    fn the_goal_s_places_are_read_whole_and_only_with_a_capital() {
        let places = places_written("At 11 pm São Paulo time, and 17:45 UTC, what is it in Buenos Aires or lima?");
        let keys: Vec<&str> = places.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["sao paulo", "utc", "buenos aires"]);
        assert_eq!(places[0].1, "São Paulo");
    }
}
