//! The clients' argument cases (testkit/conformance/arguments.json, written from the module's
//! answers by tests/conformance.rs) held to the parsers, with no server: a parser that answers a
//! case otherwise fails here first.

use serde_json::Value;

use super::*;

const CASES: &str = include_str!("../../../testkit/conformance/arguments.json");

/// The parsers' answer to a command's arguments: None when they take them, else the error reply.
fn refusal(command: &str, args: &[&[u8]]) -> Option<String> {
    let args = args.iter().copied();
    let refused = match command {
        "ratelimit.hit" => parse_hit(args).and_then(|a| a.at(0)).err(),
        "ratelimit.peek" => parse_peek(args).err(),
        "ratelimit.slide" => parse_slide(args).err(),
        "ratelimit.gcra" => parse_gcra(args).err(),
        "ratelimit.hitall" => parse_hitall(args).and_then(|a| a.at(0)).err(),
        "ratelimit.acquire" => parse_acquire(args).err(),
        "ratelimit.release" => parse_release(args).err(),
        "ratelimit.renew" => parse_renew(args).err(),
        "ratelimit.top" => parse_top(args).err(),
        "ratelimit.adapt" => parse_adapt(args).err(),
        "ratelimit.report" => parse_report(args).err(),
        other => panic!("a case of {other}, which has no parser here"),
    };
    refused.map(ArgError::message)
}

#[test]
fn the_parsers_answer_every_case_as_the_module_did() {
    let cases: Vec<Value> = serde_json::from_str(CASES).unwrap();
    assert!(cases.len() >= 150, "{} cases", cases.len());
    for case in &cases {
        let args: Vec<&[u8]> =
            case["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().as_bytes()).collect();
        let command = case["command"].as_str().unwrap();
        let error = case["error"].as_str().map(str::to_string);
        assert_eq!(refusal(command, &args), error, "{command} {}", case["args"]);
    }
}
