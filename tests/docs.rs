//! The reference in docs/ keeps up with the code: each command's page names every argument and
//! option its `COMMAND DOCS` describes (the parsers' error texts are checked against the pages by
//! the unit test in src/core/args/mod.rs), and every relative link of the docs leads to a file.

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

/// The first `key = "value"` (TOML) or `"key": "value"` (JSON) in `text` after `section`.
fn field(text: &str, section: &str, key: &str) -> String {
    let after = &text[text.find(section).unwrap_or_else(|| panic!("no {section}"))..];
    let start = [format!("\n{key} = \""), format!("\"{key}\": \"")]
        .iter()
        .find_map(|p| after.find(p.as_str()).map(|at| at + p.len()))
        .unwrap_or_else(|| panic!("no {key} after {section}"));
    after[start..].split('"').next().unwrap().to_string()
}

/// A Python distribution's name as pip compares them (PEP 503): lowercase, runs of `-_.` as `-`.
fn pep503(name: &str) -> String {
    let lower = name.to_ascii_lowercase().replace(['_', '.'], "-");
    lower.split('-').filter(|part| !part.is_empty()).collect::<Vec<_>>().join("-")
}

/// Every Markdown page a user reads: README.md, docs/ (all of it), the clients' and the release
/// files' READMEs (the tarball's, and the one the .deb installs).
fn user_pages() -> Vec<std::path::PathBuf> {
    let mut pages =
        vec![root().join("README.md"), root().join("packaging/README.md"), root().join("packaging/debian/README.md")];
    let mut dirs = vec![root().join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    for client in std::fs::read_dir(root().join("clients")).unwrap() {
        let readme = client.unwrap().path().join("README.md");
        if readme.exists() {
            pages.push(readme);
        }
    }
    pages
}

/// Every `pip install`, `npm install` and `apt install ./...deb` line of the docs installs this
/// project's package: by the name in clients/python/pyproject.toml or clients/node/package.json,
/// or by the release file `make package` names after it and its version; and no other name on
/// such a line looks like a rate limiter's (PyPI's `redis-ratelimit` is another project's).
#[test]
fn every_install_line_names_this_projects_packages() {
    let pyproject = std::fs::read_to_string(root().join("clients/python/pyproject.toml")).unwrap();
    let package_json = std::fs::read_to_string(root().join("clients/node/package.json")).unwrap();
    let cargo = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let python = pep503(&field(&pyproject, "[project]", "name"));
    let wheel_prefix = format!("{}-{}-", python.replace('-', "_"), field(&pyproject, "[project]", "version"));
    let node = field(&package_json, "{", "name");
    let tgz = format!("{node}-{}.tgz", field(&package_json, "{", "version"));
    let deb = format!("{}_{}_amd64.deb", field(&cargo, "[package]", "name"), field(&cargo, "[package]", "version"));
    // What a line installs, per tool: is this argument ours?
    let ours = |tool: &str, arg: &str| -> bool {
        let file = arg.rsplit('/').next().unwrap();
        match tool {
            "pip" if arg.contains('/') => {
                let file = file.split('[').next().unwrap();
                file.starts_with(&wheel_prefix) && (file.ends_with(".whl") || file.ends_with(".tar.gz"))
            }
            "pip" => pep503(arg.split(['[', '<', '>', '=', '!', '~', ';', '@']).next().unwrap()) == python,
            "npm" if arg.ends_with(".tgz") => file == tgz,
            "npm" => arg.rsplit_once('@').filter(|(name, _)| !name.is_empty()).map_or(arg, |(name, _)| name) == node,
            _ => file == deb,
        }
    };
    let verbs = [("pip install ", "pip"), ("pip3 install ", "pip"), ("npm install ", "npm"), ("npm i ", "npm")];
    let (mut lines, mut wrong) = (0, Vec::new());
    for page in user_pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (number, line) in text.lines().enumerate() {
            let mut found: Vec<(&str, &str)> = verbs
                .iter()
                .filter_map(|(verb, tool)| line.find(verb).map(|at| (*tool, &line[at + verb.len()..])))
                .collect();
            if let Some(at) = line.find("apt install ./").or_else(|| line.find("apt-get install ./")) {
                found.push(("apt", line[at..].split_once(" ./").unwrap().1));
            }
            for (tool, rest) in found {
                // The command ends where the prose or a comment starts.
                let command = rest.split(['`', ')', '#', ';', '|']).next().unwrap().split("&&").next().unwrap();
                let args: Vec<&str> = command
                    .split_whitespace()
                    .map(|a| a.trim_matches(['"', '\'']))
                    .filter(|a| !a.starts_with('-') && !a.is_empty())
                    .collect();
                let place = format!("{}:{}: {}", page.strip_prefix(root()).unwrap().display(), number + 1, line.trim());
                let others_look_ours = args.iter().any(|a| {
                    !ours(tool, a) && a.to_ascii_lowercase().replace(['-', '_', '.'], "").contains("ratelimit")
                });
                if !args.iter().any(|a| ours(tool, a)) || others_look_ours {
                    wrong.push(place);
                }
                lines += 1;
            }
        }
    }
    assert!(lines >= 8, "only {lines} install lines found: is the search still right?");
    assert!(
        wrong.is_empty(),
        "install lines that do not name {python} ({wheel_prefix}*.whl), {node} ({tgz}) or {deb}:\n{}",
        wrong.join("\n")
    );
}

/// Every Maven coordinate of the docs (`io.github.redis-ratelimit:name[:version]`, and a pom's
/// `<groupId>io.github.redis-ratelimit</groupId>` with its `<artifactId>` and `<version>`) names
/// an artifact clients/java publishes (each module's pom but the tests'), at its version.
#[test]
fn every_maven_coordinate_names_a_published_java_artifact() {
    const GROUP: &str = "io.github.redis-ratelimit";
    let between = |text: &str, open: &str, close: &str| -> Option<String> {
        let start = text.find(open)? + open.len();
        Some(text[start..start + text[start..].find(close)?].trim().to_string())
    };
    let parent = std::fs::read_to_string(root().join("clients/java/pom.xml")).unwrap();
    let version = between(&parent, "<artifactId>redis-ratelimit-parent</artifactId>", "</version>").unwrap();
    let version = version.trim_start_matches("<version>").to_string();
    let mut published = Vec::new();
    for module in std::fs::read_dir(root().join("clients/java")).unwrap() {
        let pom = module.unwrap().path().join("pom.xml");
        if pom.exists() && !pom.starts_with(root().join("clients/java/tests")) {
            let text = std::fs::read_to_string(&pom).unwrap();
            published.push(between(&text, "</parent>", "</artifactId>").unwrap().replace("<artifactId>", ""));
        }
    }
    assert!(published.len() >= 3, "published artifacts: {published:?}");
    let (mut coordinates, mut wrong) = (0, Vec::new());
    for page in user_pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        let mut found: Vec<(String, Option<String>)> = Vec::new();
        for (at, _) in text.match_indices(&format!("{GROUP}:")) {
            let rest = &text[at + GROUP.len() + 1..];
            let coordinate: String =
                rest.chars().take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | ':')).collect();
            let mut parts = coordinate.splitn(2, ':');
            found.push((parts.next().unwrap().to_string(), parts.next().map(str::to_string)));
        }
        for (at, _) in text.match_indices(&format!("<groupId>{GROUP}</groupId>")) {
            let rest = &text[at..];
            let dependency = &rest[..rest.find("</dependency>").unwrap_or(rest.len())];
            let artifact = between(dependency, "<artifactId>", "</artifactId>").unwrap_or_default();
            found.push((artifact, between(dependency, "<version>", "</version>")));
        }
        for (artifact, at_version) in found {
            coordinates += 1;
            if !published.contains(&artifact) || at_version.as_ref().is_some_and(|v| *v != version) {
                wrong.push(format!("{name}: {artifact}{}", at_version.map(|v| format!(":{v}")).unwrap_or_default()));
            }
        }
    }
    assert!(coordinates >= 3, "only {coordinates} Maven coordinates found: is the search still right?");
    assert!(
        wrong.is_empty(),
        "Maven coordinates that clients/java does not publish ({published:?} {version}):\n{}",
        wrong.join("\n")
    );
}
