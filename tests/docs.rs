//! The reference in docs/ keeps up with the code: each command's page names every argument and
//! option its `COMMAND DOCS` describes (the parsers' error texts are checked against the pages by
//! the unit test in src/core/args.rs), and every relative link of the docs leads to a file.

use ratelimit_testkit as common;

use std::collections::HashMap;
use std::path::Path;

use common::{Config, Server};
use redis::Value;

const COMMANDS: [&str; 13] = [
    "ratelimit.hit",
    "ratelimit.hitall",
    "ratelimit.peek",
    "ratelimit.slide",
    "ratelimit.acquire",
    "ratelimit.release",
    "ratelimit.renew",
    "ratelimit.gcra",
    "ratelimit.settle",
    "cl.throttle",
    "ratelimit.audit",
    "ratelimit.repair",
    "ratelimit.top",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// What a page must name of each argument: an option's token (`COST`), a block's arguments, any
/// other argument's name.
fn names(arguments: &[HashMap<String, Value>], into: &mut Vec<String>) {
    for argument in arguments {
        if let Some(token) = argument.get("token") {
            into.push(redis::from_redis_value(token).unwrap());
        } else if let Some(nested) = argument.get("arguments") {
            names(&redis::from_redis_value::<Vec<HashMap<String, Value>>>(nested).unwrap(), into);
        } else {
            into.push(redis::from_redis_value(&argument["name"]).unwrap());
        }
    }
}

#[test]
fn each_commands_page_names_every_argument_of_its_command_docs() {
    if common::module_only("COMMAND DOCS") {
        return;
    }
    let server = Server::with(Config { module_args: &["CL.THROTTLE"], ..Config::default() });
    let mut con = server.connect();
    let mut missing = Vec::new();
    for command in COMMANDS {
        let page = std::fs::read_to_string(root().join(format!("docs/commands/{command}.md"))).unwrap();
        let docs: Vec<Value> = redis::cmd("COMMAND").arg("DOCS").arg(command).query(&mut con).unwrap();
        assert_eq!(docs.len(), 2, "{command} has docs");
        let doc: HashMap<String, Value> = redis::from_redis_value(&docs[1]).unwrap();
        let mut arguments = Vec::new();
        names(&redis::from_redis_value::<Vec<HashMap<String, Value>>>(&doc["arguments"]).unwrap(), &mut arguments);
        assert!(arguments.len() >= 2, "{command}: {arguments:?}");
        for name in arguments {
            if !page.contains(&format!("`{name}")) && !page.contains(&format!(" {name}")) {
                missing.push(format!("docs/commands/{command}.md does not name `{name}`"));
            }
        }
        let summary: String = redis::from_redis_value(&doc["summary"]).unwrap();
        assert!(page.starts_with(&format!("# {}", command.to_uppercase())), "{command}: the page's title");
        assert!(!summary.is_empty());
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn every_relative_link_of_the_docs_leads_to_a_file() {
    let mut pages = vec![root().join("README.md")];
    for dir in ["docs", "docs/commands"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for link in text.split("](").skip(1).filter_map(|rest| rest.split(')').next()) {
            if link.starts_with("http") || link.starts_with('#') {
                continue;
            }
            let file = link.split('#').next().unwrap();
            if !page.parent().unwrap().join(file).exists() {
                broken.push(format!("{}: {link}", page.display()));
            }
        }
    }
    assert!(pages.len() >= 10, "{pages:?}");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
