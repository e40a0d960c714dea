//! The document parses, its references resolve, and it cannot drift from the router: every
//! documented operation is answered by a real route, and every route is documented.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt;

use super::document;

/// Route registrations of the HTTP modules: each `.route("…", get(…).post(…))` is one line.
const SOURCES: [&str; 9] = [
    include_str!("../mod.rs"),
    include_str!("../anyscale/mod.rs"),
    include_str!("../config.rs"),
    include_str!("../jobs.rs"),
    include_str!("../workflows.rs"),
    include_str!("../runs.rs"),
    include_str!("../stream.rs"),
    include_str!("../openapi.rs"),
    include_str!("../auth.rs"),
];

/// Where a module's routes are mounted.
const PREFIXES: [&str; 5] = ["", "/api/v1", "/api/v1/scheduler/config", "/api/v2", "/api/v2/scheduler"];

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// `(path, method)` of every documented operation.
fn operations(doc: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths is an object") {
        for method in METHODS {
            if item.get(method).is_some() {
                out.push((path.clone(), method.to_string()));
            }
        }
    }
    out
}

fn collect_refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("$ref") {
                out.push(r);
            }
            map.values().for_each(|v| collect_refs(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

#[test]
fn document_parses_and_every_reference_resolves() {
    let doc = document().unwrap();
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.0.")), "{}", doc["openapi"]);
    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["bearerAuth"]["scheme"], "bearer");
    assert_eq!(schemes["cookieAuth"]["name"], "berth_session");
    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    assert!(refs.len() > 100, "only {} references", refs.len());
    for r in refs {
        let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("{r}: only local references"));
        assert!(doc.pointer(pointer).is_some(), "{r} does not resolve");
    }
    // Every operation answers its error statuses with the one error shape.
    for (path, method) in operations(&doc) {
        let op = &doc["paths"][&path][&method];
        assert!(op["operationId"].is_string(), "{method} {path}: no operationId");
        for (status, response) in op["responses"].as_object().unwrap() {
            if status.starts_with('4') || status.starts_with('5') {
                assert!(response["$ref"].is_string(), "{method} {path} {status}: use a components/responses entry");
            }
        }
    }
}

/// `(path, method)` of every route registered in the HTTP modules' source, unmounted.
fn registered_routes() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for source in SOURCES {
        for line in source.lines() {
            let Some((_, rest)) = line.split_once(".route(\"") else { continue };
            let Some((path, handlers)) = rest.split_once('"') else { continue };
            for method in METHODS {
                let call = format!("{method}(");
                let named = handlers.match_indices(&call).any(|(i, _)| {
                    !handlers[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_')
                });
                if named {
                    out.push((path.to_string(), method.to_string()));
                }
            }
        }
    }
    out
}

#[test]
fn every_route_is_documented() {
    let doc = document().unwrap();
    let documented = operations(&doc);
    let routes = registered_routes();
    assert!(routes.len() >= 25, "found only {} routes: is every `.route(` still on one line?", routes.len());
    for (path, method) in routes {
        let suffix = if path == "/" { "" } else { path.as_str() };
        let found = PREFIXES.iter().any(|p| documented.contains(&(format!("{p}{suffix}"), method.clone())));
        assert!(found, "{} {path} is routed but not in openapi.yaml", method.to_uppercase());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_operation_is_routed() {
    let dir = std::env::temp_dir().join(format!("berth_openapi_{}_{}", std::process::id(), crate::clock::now_us()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = crate::store::Db::connect(&format!("sqlite://{}/berth.db", dir.display())).await.unwrap();
    // No local backend: nothing submitted here could ever run.
    let options = crate::state::RuntimeOptions { local: None, ..crate::state::RuntimeOptions::local(dir.clone()) };
    let state = crate::state::AppState::start(db, options).await.unwrap();
    let app = crate::http::api_routes(state);
    let doc = document().unwrap();
    for (path, method) in operations(&doc) {
        let uri = path.replace("{id}", "j-none").replace("{version}", "1").replace("{name}", "default").replace("{queue_id}", "default");
        let request = Request::builder()
            .method(Method::from_bytes(method.to_uppercase().as_bytes()).unwrap())
            .uri(&uri)
            .header("content-type", "application/json")
            .body(Body::from("{}"))
            .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {uri}");
        if status == StatusCode::NOT_FOUND {
            // Only read the body of a 404: a live stream never ends.
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let message = body["error"]["message"].as_str().unwrap_or("");
            assert!(!message.is_empty() && message != "no such API endpoint", "{method} {uri}: not routed ({body})");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
