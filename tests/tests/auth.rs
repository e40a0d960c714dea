//! Who may do what, against a real server with authentication on (no anonymous mode), on
//! SQLite and PostgreSQL: each role × action allowed or refused with 401/403, revocation at
//! once, CSRF refusal for the session cookie, the `anyscale` SDK's `cli_token` cookie, the
//! audit log, and identity that no request field can spoof.

mod common;

use app::auth::Role;
use common::{fresh_database, Backend, TestApp};
use serde_json::{json, Value};
use server::state::RuntimeOptions;

const ADMIN: &str = "berth_admin_secret_for_tests_0001";

/// A config where every role can be exercised: one queue, one catch-all rule, and a quota of
/// 0 so jobs stay pending (cancels and priority changes always find them live).
const CONFIG: &str = r#"resource_flavors:
  - name: local
resource_queues:
  - name: default
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 0}]}]
scheduling_rules:
  - resource_queue: default
"#;

struct Server {
    app: TestApp,
    http: reqwest::Client,
}

/// What a request came back with.
struct Answer {
    status: u16,
    body: Value,
    headers: reqwest::header::HeaderMap,
}

impl Server {
    async fn start(backend: Backend) -> Server {
        let db_url = fresh_database(backend).await;
        let data_dir = std::env::temp_dir().join(format!("berth_auth_{}", server::clock::new_id("d")));
        let mut options = RuntimeOptions::local(data_dir.clone());
        options.access.anonymous = false;
        options.access.admin_token = Some(ADMIN.into());
        options.settings.workdir_roots = vec![data_dir.clone()];
        let app = TestApp::spawn_with(db_url, options).await;
        let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        let s = Server { app, http };
        let a = s.call("POST", "/api/v1/scheduler/config", Some(ADMIN), Some(CONFIG)).await;
        assert_eq!(a.status, 200, "{}", a.body);
        s
    }

    async fn token(&self, user: &str, role: Role) -> String {
        self.app.token(user, role).await
    }

    /// `method path` with an optional bearer token and body (JSON unless it starts with a
    /// YAML key).
    async fn call(&self, method: &str, path: &str, token: Option<&str>, body: Option<&str>) -> Answer {
        self.send(method, path, token, body, &[]).await
    }

    async fn send(&self, method: &str, path: &str, token: Option<&str>, body: Option<&str>, headers: &[(&str, &str)]) -> Answer {
        let mut req = self.http.request(method.parse().unwrap(), format!("{}{path}", self.app.url));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            let yaml = !b.trim_start().starts_with('{');
            req = req.header("content-type", if yaml { "application/yaml" } else { "application/json" }).body(b.to_string());
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let body = r.json().await.unwrap_or(Value::Null);
        Answer { status, body, headers }
    }

    async fn submit(&self, token: &str) -> Answer {
        self.call("POST", "/api/v1/jobs", Some(token), Some(&json!({ "entrypoint": "true", "resources": { "cpu": 1 } }).to_string())).await
    }

    /// Posts the sign-in form with `fields` and `headers`, as a browser would.
    async fn sign_in_form(&self, fields: &[(&str, &str)], headers: &[(&str, &str)]) -> reqwest::Response {
        let enc = |v: &str| v.bytes().map(|b| if b.is_ascii_alphanumeric() || b == b'_' { (b as char).to_string() } else { format!("%{b:02X}") }).collect::<String>();
        let body = fields.iter().map(|(k, v)| format!("{k}={}", enc(v))).collect::<Vec<_>>().join("&");
        let mut req = self.http.post(format!("{}/auth/signin", self.app.url)).header("content-type", "application/x-www-form-urlencoded").body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send().await.unwrap()
    }

    /// Signs in with `token` through the dashboard's form; the session cookie.
    async fn sign_in(&self, token: &str) -> String {
        let r = self.sign_in_form(&[("token", token), ("next", "/jobs")], &[]).await;
        assert_eq!(r.status().as_u16(), 303);
        assert_eq!(r.headers()["location"], "/jobs");
        let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
        for flag in ["HttpOnly", "SameSite=Strict", "Path=/"] {
            assert!(cookie.contains(flag), "session cookie lacks {flag}: {cookie}");
        }
        cookie.split(';').next().unwrap().to_string()
    }

    async fn audit(&self, action: &str) -> Vec<Value> {
        let a = self.call("GET", &format!("/api/v1/audit?action={action}"), Some(ADMIN), None).await;
        assert_eq!(a.status, 200, "{}", a.body);
        a.body["entries"].as_array().unwrap().clone()
    }
}

async fn each_role_may_do_exactly_its_part(backend: Backend) {
    let s = Server::start(backend).await;
    let owner = s.token("olga", Role::Submitter).await;
    let olgas_job = s.submit(&owner).await.body["id"].as_str().unwrap().to_string();

    for role in Role::ALL {
        let user = format!("{role}-user");
        let t = s.token(&user, role).await;
        let at_least = |needed: Role| if role.allows(needed) { "allowed" } else { "refused" };
        let outcome = |a: &Answer| match a.status {
            200 | 201 => "allowed",
            403 => "refused",
            other => panic!("{role}: unexpected {other}: {}", a.body),
        };

        // Everyone reads.
        for path in ["/api/v1/jobs", "/api/v1/queues", "/api/v1/events", "/api/v1/scheduler/config", "/api/v1/nodes", "/api/v1/whoami"] {
            assert_eq!(s.call("GET", path, Some(&t), None).await.status, 200, "{role} reads {path}");
        }
        let me = s.call("GET", "/api/v1/whoami", Some(&t), None).await.body;
        assert_eq!((me["user"].as_str(), me["role"].as_str()), (Some(user.as_str()), Some(role.as_str())));

        let submitted = s.submit(&t).await;
        assert_eq!(outcome(&submitted), at_least(Role::Submitter), "{role} submits: {}", submitted.body);
        if submitted.status == 403 {
            assert_eq!(submitted.body["error"]["code"], "forbidden");
            assert!(submitted.body["error"]["message"].as_str().unwrap().contains("needs the submitter role"), "{}", submitted.body);
        }
        if let Some(own) = submitted.body["id"].as_str() {
            assert_eq!(submitted.body["submitter"], user.as_str(), "the submitter is the token's user");
            let a = s.call("POST", &format!("/api/v1/jobs/{own}/priority"), Some(&t), Some(r#"{"priority": 3}"#)).await;
            assert_eq!(a.status, 200, "{role} re-prioritises its own job: {}", a.body);
            let a = s.call("POST", &format!("/api/v1/jobs/{own}/cancel"), Some(&t), None).await;
            assert_eq!(a.status, 200, "{role} cancels its own job: {}", a.body);
        }

        // Someone else's job: only admins.
        let a = s.call("POST", &format!("/api/v1/jobs/{olgas_job}/priority"), Some(&t), Some(r#"{"priority": 1}"#)).await;
        assert_eq!(outcome(&a), at_least(Role::Admin), "{role} re-prioritises olga's job: {}", a.body);

        let applied = s.call("POST", "/api/v1/scheduler/config?message=by+role", Some(&t), Some(CONFIG)).await;
        assert_eq!(outcome(&applied), at_least(Role::Editor), "{role} applies: {}", applied.body);
        let rolled = s.call("POST", "/api/v1/scheduler/config/rollback", Some(&t), Some(r#"{"version": 2}"#)).await;
        assert_eq!(outcome(&rolled), at_least(Role::Editor), "{role} rolls back: {}", rolled.body);

        let listed = s.call("GET", "/api/v1/tokens", Some(&t), None).await;
        assert_eq!(outcome(&listed), at_least(Role::Admin), "{role} lists tokens");
        let made = s.call("POST", "/api/v1/tokens", Some(&t), Some(r#"{"user": "x", "role": "viewer"}"#)).await;
        assert_eq!(outcome(&made), at_least(Role::Admin), "{role} creates a token");
        let audit = s.call("GET", "/api/v1/audit", Some(&t), None).await;
        assert_eq!(outcome(&audit), at_least(Role::Admin), "{role} reads the audit log");
    }
    // Olga's job was cancelled by nobody but its priority was changed by the admin only.
    let a = s.call("POST", &format!("/api/v1/jobs/{olgas_job}/cancel"), Some(&owner), None).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["reason"], "cancelled by olga");
}

async fn no_or_bad_credentials_get_401(backend: Backend) {
    let s = Server::start(backend).await;
    for (method, path) in [("GET", "/api/v1/jobs"), ("POST", "/api/v1/jobs"), ("GET", "/api/v1/scheduler/config"), ("POST", "/add_task"), ("GET", "/api/v1/stream")] {
        let a = s.call(method, path, None, None).await;
        assert_eq!(a.status, 401, "{method} {path} without credentials: {}", a.body);
        assert_eq!(a.body["error"]["code"], "unauthorized");
        let a = s.call(method, path, Some("berth_not_a_token"), None).await;
        assert_eq!(a.status, 401, "{method} {path} with a made-up token");
        assert!(a.body["error"]["message"].as_str().unwrap().contains("unknown or revoked"));
    }
    let a = s.send("GET", "/api/v1/jobs", None, None, &[("authorization", "Basic YWRtaW46YWRtaW4=")]).await;
    assert_eq!(a.status, 401);
    assert!(a.body["error"]["message"].as_str().unwrap().contains("Bearer"));
    // Health checks, static files and the sign-in page need nobody.
    assert_eq!(s.call("GET", "/healthz", None, None).await.status, 200);
    assert_eq!(s.call("GET", "/readyz", None, None).await.status, 200);
    assert_ne!(s.call("GET", "/signin", None, None).await.status, 303);
    // A dashboard page sends the browser to sign in, and back afterwards.
    let a = s.call("GET", "/jobs?state=failed", None, None).await;
    assert_eq!(a.status, 303);
    assert_eq!(a.headers["location"], "/signin?next=%2Fjobs%3Fstate%3Dfailed");
}

async fn revocation_takes_effect_at_once(backend: Backend) {
    let s = Server::start(backend).await;
    let made = s.call("POST", "/api/v1/tokens", Some(ADMIN), Some(r#"{"user": "rita", "role": "editor", "label": "laptop"}"#)).await;
    assert_eq!(made.status, 201, "{}", made.body);
    let secret = made.body["secret"].as_str().unwrap().to_string();
    let id = made.body["token"]["id"].as_str().unwrap().to_string();
    let listed = s.call("GET", "/api/v1/tokens", Some(ADMIN), None).await;
    assert!(!listed.body.to_string().contains(&secret), "the secret is never listed");
    let cookie = s.sign_in(&secret).await;
    assert_eq!(s.call("GET", "/api/v1/jobs", Some(&secret), None).await.status, 200);
    let with_cookie = [("cookie", cookie.as_str())];
    assert_eq!(s.send("GET", "/api/v1/whoami", None, None, &with_cookie).await.body["via"], "session");

    let revoked = s.call("POST", &format!("/api/v1/tokens/{id}/revoke"), Some(ADMIN), None).await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    assert_eq!(revoked.body["revoked_by"], "admin");
    let a = s.call("GET", "/api/v1/jobs", Some(&secret), None).await;
    assert_eq!(a.status, 401, "the very next request is refused");
    let a = s.send("GET", "/api/v1/whoami", None, None, &with_cookie).await;
    assert_eq!(a.status, 401, "and the session opened with it is gone");
    // A revoked token cannot sign in again.
    let r = s.sign_in_form(&[("token", secret.as_str())], &[]).await;
    assert_eq!(r.headers()["location"], "/signin?error=invalid&next=%2F");
    assert!(r.headers().get("set-cookie").is_none());
    let a = s.call("POST", "/api/v1/tokens/t-nope/revoke", Some(ADMIN), None).await;
    assert_eq!(a.status, 404);
    // Nobody locks themselves out: a token cannot revoke itself.
    let tokens = s.call("GET", "/api/v1/tokens", Some(ADMIN), None).await.body;
    let own = tokens.as_array().unwrap().iter().find(|t| t["label"] == "bootstrap").unwrap()["id"].as_str().unwrap().to_string();
    let a = s.call("POST", &format!("/api/v1/tokens/{own}/revoke"), Some(ADMIN), None).await;
    assert_eq!(a.status, 422, "{}", a.body);
    assert!(a.body["error"]["message"].as_str().unwrap().contains("another admin token"));
    assert_eq!(s.call("GET", "/api/v1/whoami", Some(ADMIN), None).await.status, 200);
}

async fn session_changes_need_the_dashboards_origin(backend: Backend) {
    let s = Server::start(backend).await;
    let t = s.token("sam", Role::Submitter).await;
    let cookie = s.sign_in(&t).await;
    let job = json!({ "entrypoint": "true" }).to_string();
    let host = s.app.url.trim_start_matches("http://").to_string();
    let same_origin = s.app.url.clone();
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, u16);
    let cases: [Case; 5] = [
        ("no origin at all", vec![], 403),
        ("another site's origin", vec![("origin", "http://evil.example")], 403),
        ("fetch metadata says cross-site", vec![("sec-fetch-site", "cross-site")], 403),
        ("the dashboard's own origin", vec![("origin", same_origin.as_str()), ("host", host.as_str())], 201),
        ("fetch metadata says same-origin", vec![("sec-fetch-site", "same-origin")], 201),
    ];
    for (what, extra, want) in cases {
        let mut headers = vec![("cookie", cookie.as_str())];
        headers.extend(extra);
        let a = s.send("POST", "/api/v1/jobs", None, Some(&job), &headers).await;
        assert_eq!(a.status, want, "{what}: {}", a.body);
        if want == 403 {
            assert_eq!(a.body["error"]["code"], "csrf");
        }
    }
    // Reads with the cookie need no proof, and token callers are not browsers.
    assert_eq!(s.send("GET", "/api/v1/jobs", None, None, &[("cookie", cookie.as_str())]).await.status, 200);
    assert_eq!(s.send("POST", "/api/v1/jobs", Some(&t), Some(&job), &[("origin", "http://evil.example")]).await.status, 201);
    // Sign-in from another site is refused too (no login CSRF).
    let r = s.sign_in_form(&[("token", t.as_str())], &[("origin", "http://evil.example")]).await;
    assert_eq!(r.status().as_u16(), 403);
    // Signing out ends the session.
    let r = s.http.post(format!("{}/auth/signout", s.app.url)).header("cookie", &cookie).header("sec-fetch-site", "same-origin").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 303);
    assert!(r.headers()["set-cookie"].to_str().unwrap().contains("Max-Age=0"));
    assert_eq!(s.send("GET", "/api/v1/whoami", None, None, &[("cookie", cookie.as_str())]).await.status, 401);
}

/// The `anyscale` SDK's credentials: the token as a `cli_token` cookie. It is an API token
/// (state changes need no origin), never a session, and a browser request marked
/// cross-site carrying it is refused. New tokens are in a form the SDK accepts; the old
/// `berth_` form (the admin token here) keeps working.
async fn the_cli_token_cookie_is_an_api_token(backend: Backend) {
    let s = Server::start(backend).await;
    let t = s.token("sdk-user", Role::Editor).await;
    assert!(t.starts_with("sss_berth_") && t.len() == "sss_berth_".len() + 64, "{t}");
    assert!(ADMIN.starts_with("berth_"));
    let cookie = format!("other=1; cli_token={t}");
    let with_cookie = [("cookie", cookie.as_str())];
    let me = s.send("GET", "/api/v1/whoami", None, None, &with_cookie).await;
    assert_eq!(me.body, json!({"user": "sdk-user", "role": "editor", "via": "token"}));
    let info = s.send("GET", "/api/v2/userinfo/", None, None, &with_cookie).await;
    assert_eq!(info.status, 200, "{}", info.body);
    assert_eq!((&info.body["result"]["id"], &info.body["result"]["username"]), (&json!("sdk-user"), &json!("sdk-user")));
    assert_eq!((&info.body["result"]["email"], &info.body["result"]["organization_permission_level"]), (&json!("sdk-user@berth.local"), &json!("collaborator")));
    let admin_info = s.call("GET", "/api/v2/userinfo/", Some(ADMIN), None).await;
    assert_eq!(admin_info.body["result"]["organization_permission_level"], "owner");
    // A state change with the cookie and no Origin, as the SDK sends it.
    let apply = s.send("POST", "/api/v2/scheduler/config", None, Some(&json!({"config": config_json(CONFIG)}).to_string()), &with_cookie).await;
    assert_eq!(apply.status, 200, "{}", apply.body);
    assert_eq!(s.send("POST", "/api/v2/cli_usage/", None, Some("{}"), &with_cookie).await.status, 204);
    // A browser page of another site cannot ride on it, for reads or writes.
    for (method, path) in [("GET", "/api/v2/scheduler/config"), ("POST", "/api/v2/scheduler/config/rollback")] {
        let mut headers = with_cookie.to_vec();
        headers.push(("sec-fetch-site", "cross-site"));
        let a = s.send(method, path, None, Some(r#"{"version": 1}"#), &headers).await;
        assert_eq!((a.status, &a.body["error"]["code"]), (403, &json!("csrf")), "{method} {path}: {}", a.body);
    }
    // An unknown token in the cookie is a 401, at the SDK's handshake too.
    let stranger = [("cookie", "cli_token=sss_nobody")];
    let a = s.send("GET", "/api/v2/userinfo/", None, None, &stranger).await;
    assert_eq!((a.status, a.body["error"]["message"].as_str()), (401, Some("the API token is not valid: unknown or revoked")));
    assert_eq!(s.call("GET", "/api/v2/userinfo/", None, None).await.status, 401);
    // Roles hold on /api/v2 as on /api/v1.
    let viewer = format!("cli_token={}", s.token("vera", Role::Viewer).await);
    let a = s.send("POST", "/api/v2/scheduler/config/rollback", None, Some(r#"{"version": 1}"#), &[("cookie", viewer.as_str())]).await;
    assert_eq!((a.status, a.body["error"]["message"].as_str()), (403, Some("rolling back the config needs the editor role; vera is a viewer")));
    // And an unknown /api/v2 path is a JSON 404, not the dashboard.
    let a = s.call("GET", "/api/v2/nothing", Some(ADMIN), None).await;
    assert_eq!((a.status, &a.body["error"]["code"]), (404, &json!("not_found")));
}

/// [`CONFIG`] as a JSON value.
fn config_json(yaml: &str) -> Value {
    serde_json::to_value(app::config::parse(yaml, app::config::Format::Yaml).unwrap()).unwrap()
}

async fn every_audited_action_is_recorded(backend: Backend) {
    let s = Server::start(backend).await;
    let ed = s.token("edna", Role::Editor).await;
    s.sign_in(&ed).await;
    assert_eq!(s.call("POST", "/api/v1/scheduler/config?message=more", Some(&ed), Some(&CONFIG.replace("nominal_quota: 0}", "nominal_quota: 0.5}"))).await.status, 200);
    assert_eq!(s.call("POST", "/api/v1/scheduler/config/rollback", Some(&ed), Some(r#"{"version": 2}"#)).await.status, 200);
    let job = s.submit(&ed).await.body["id"].as_str().unwrap().to_string();
    assert_eq!(s.call("POST", &format!("/api/v1/jobs/{job}/priority"), Some(ADMIN), Some(r#"{"priority": 5}"#)).await.status, 200);
    assert_eq!(s.call("POST", &format!("/api/v1/jobs/{job}/cancel"), Some(ADMIN), None).await.status, 200);
    let made = s.call("POST", "/api/v1/tokens", Some(ADMIN), Some(r#"{"user": "tim", "role": "viewer"}"#)).await;
    let id = made.body["token"]["id"].as_str().unwrap().to_string();
    assert_eq!(s.call("POST", &format!("/api/v1/tokens/{id}/revoke"), Some(ADMIN), None).await.status, 200);

    let one = |entries: Vec<Value>, what: &str| -> Value {
        assert!(!entries.is_empty(), "no audit entry for {what}");
        entries[0].clone()
    };
    let e = one(s.audit("config.apply").await, "apply");
    assert_eq!((e["actor"].as_str(), e["target"].as_str()), (Some("edna"), Some("version 3")));
    assert!(e["detail"].as_str().unwrap().contains("more"), "{e}");
    let e = one(s.audit("config.rollback").await, "rollback");
    assert_eq!((e["actor"].as_str(), e["target"].as_str()), (Some("edna"), Some("version 4")));
    assert!(e["detail"].as_str().unwrap().contains("rollback to version 2"), "{e}");
    let e = one(s.audit("job.priority").await, "priority");
    assert_eq!((e["actor"].as_str(), e["target"].as_str()), (Some("admin"), Some(job.as_str())));
    assert!(e["detail"].as_str().unwrap().ends_with("0 → 5"), "{e}");
    let e = one(s.audit("job.cancel").await, "cancel");
    assert_eq!((e["actor"].as_str(), e["target"].as_str()), (Some("admin"), Some(job.as_str())));
    assert!(e["detail"].as_str().unwrap().contains("of edna"), "{e}");
    let e = one(s.audit("token.revoke").await, "revoke");
    assert_eq!((e["actor"].as_str(), e["target"].as_str()), (Some("admin"), Some(id.as_str())));
    let creates = s.audit("token.create").await;
    assert!(creates.iter().any(|e| e["detail"].as_str().unwrap().contains("token for tim with the viewer role")), "{creates:?}");
    let e = one(s.audit("session.signin").await, "sign-in");
    assert_eq!(e["actor"], "edna");
    // Filters and paging.
    let a = s.call("GET", "/api/v1/audit?actor=edna&max_items=1", Some(ADMIN), None).await;
    assert_eq!(a.body["entries"].as_array().unwrap().len(), 1);
    let cursor = a.body["next_cursor"].as_str().expect("more entries by edna").to_string();
    let a = s.call("GET", &format!("/api/v1/audit?actor=edna&cursor={cursor}"), Some(ADMIN), None).await;
    assert!(a.body["entries"].as_array().unwrap().iter().all(|e| e["actor"] == "edna"));
    let a = s.call("GET", "/api/v1/audit?action=nonsense", Some(ADMIN), None).await;
    assert_eq!(a.status, 400);
    assert!(a.body["error"]["message"].as_str().unwrap().starts_with("action:"));
}

async fn identity_cannot_be_spoofed(backend: Backend) {
    let s = Server::start(backend).await;
    let ann = s.token("ann", Role::Editor).await;
    let spoof = [("x-berth-user", "mallory")];
    let a = s.send("POST", "/api/v1/scheduler/config", Some(&ann), Some(CONFIG), &spoof).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let v = s.call("GET", "/api/v1/scheduler/config", Some(&ann), None).await.body;
    assert_eq!(v["creator_id"], "ann", "the header is ignored");
    let body = json!({ "config": v["config"], "creator_id": "mallory" }).to_string();
    let a = s.call("POST", "/api/v1/scheduler/config", Some(&ann), Some(&body)).await;
    assert_eq!(a.status, 400, "a creator_id field is refused, not used: {}", a.body);
    assert!(a.body["error"]["message"].as_str().unwrap().contains("creator_id"), "{}", a.body);
    let a = s.send("POST", "/api/v1/jobs", Some(&ann), Some(r#"{"entrypoint": "true", "submitter": "mallory"}"#), &spoof).await;
    assert_eq!(a.status, 400, "{}", a.body);
    let a = s.send("POST", "/add_task", Some(&ann), Some(r#"{"name": "t", "entrypoint": "true", "runtime_env": {}, "priority": 1, "cpu": 1, "gpu": 0, "memory": 0, "timeout": 0}"#), &spoof).await;
    assert!(a.status < 300, "{}", a.body);
    let id = a.body["task_id"].as_str().unwrap().to_string();
    let job = s.call("GET", &format!("/api/v1/jobs/{id}"), Some(&ann), None).await.body;
    assert_eq!(job["submitter"], "ann", "{job}");
}

async fn working_dirs_outside_the_roots_are_refused(backend: Backend) {
    let s = Server::start(backend).await;
    let t = s.token("wes", Role::Submitter).await;
    let a = s.call("POST", "/api/v1/jobs", Some(&t), Some(r#"{"entrypoint": "ls", "runtime_env": {"working_dir": "/etc"}}"#)).await;
    assert_eq!(a.status, 422, "{}", a.body);
    let msg = a.body["error"]["message"].as_str().unwrap();
    assert!(msg.starts_with("runtime_env.working_dir: `/etc` is outside the allowed roots"), "{msg}");
    let jobs = s.call("GET", "/api/v1/jobs?submitter=wes", Some(&t), None).await.body;
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 0, "nothing was recorded");
}

async fn pages_carry_a_strict_content_security_policy(backend: Backend) {
    let s = Server::start(backend).await;
    let r = s.http.get(format!("{}/signin", s.app.url)).send().await.unwrap();
    let csp = r.headers()["content-security-policy"].to_str().unwrap().to_string();
    let html = r.text().await.unwrap();
    let nonce = csp.split("'nonce-").nth(1).and_then(|t| t.split('\'').next()).expect("a nonce in the policy");
    assert!(csp.contains("default-src 'self'") && csp.contains("object-src 'none'") && csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(!csp.contains("'unsafe-eval'") && !csp.contains("script-src 'self' 'unsafe-inline'"), "{csp}");
    assert!(html.contains(&format!("nonce=\"{nonce}\"")), "the hydration script carries this response's nonce");
    let again = s.http.get(format!("{}/signin", s.app.url)).send().await.unwrap();
    assert_ne!(again.headers()["content-security-policy"].to_str().unwrap(), csp, "a fresh nonce per response");
    // A page that does not exist is rendered with this response's nonce too, so it hydrates.
    let r = s.http.get(format!("{}/no-such-page", s.app.url)).bearer_auth(ADMIN).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let csp = r.headers()["content-security-policy"].to_str().unwrap().to_string();
    let nonce = csp.split("'nonce-").nth(1).and_then(|t| t.split('\'').next()).expect("a nonce in the policy");
    let html = r.text().await.unwrap();
    assert!(html.contains(&format!("nonce=\"{nonce}\"")) && !html.contains("nonce=\"\""), "the 404 page's scripts carry the policy's nonce");
    let api = s.call("GET", "/api/v1/jobs", Some(ADMIN), None).await;
    assert_eq!(api.headers["content-security-policy"], "default-src 'none'; frame-ancestors 'none'");
    assert_eq!(api.headers["x-content-type-options"], "nosniff");
}

async fn sign_in_failures_are_rate_limited(backend: Backend) {
    let s = Server::start(backend).await;
    let good = s.token("gil", Role::Viewer).await;
    for i in 0..server::services::auth::SIGNIN_FAILURES {
        let r = s.sign_in_form(&[("token", &format!("berth_guess_{i}"))], &[]).await;
        assert_eq!(r.status().as_u16(), 303, "attempt {i} is answered");
    }
    let r = s.sign_in_form(&[("token", good.as_str())], &[]).await;
    assert_eq!(r.status().as_u16(), 429, "even a good token waits once the address is locked out");
    assert!(r.headers().contains_key("retry-after"));
    // Tokens on the API are unaffected.
    assert_eq!(s.call("GET", "/api/v1/jobs", Some(&good), None).await.status, 200);
}

on_both_databases!(
    each_role_may_do_exactly_its_part,
    no_or_bad_credentials_get_401,
    revocation_takes_effect_at_once,
    session_changes_need_the_dashboards_origin,
    the_cli_token_cookie_is_an_api_token,
    every_audited_action_is_recorded,
    identity_cannot_be_spoofed,
    working_dirs_outside_the_roots_are_refused,
    pages_carry_a_strict_content_security_policy,
    sign_in_failures_are_rate_limited,
);
