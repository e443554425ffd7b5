//! The authorisation matrix, generated from the OpenAPI document: every
//! operation it lists, crossed with every way a caller can be wrong (no
//! token, a malformed, expired, foreign or unsigned one, a key that is
//! none), every role alone and in pairs, platform roles acting in another
//! organization, another organization's resource, and API keys of each
//! role, which are allowed what tokens of their roles are (but making
//! keys). A new operation is covered the moment
//! the document lists it, with the roles its `x-floe-roles` names.
//!
//! A refused cell asserts its status and error code, and that the call
//! changed nothing (the state every reader can see is the same before and
//! after). An allowed cell asserts only that authorisation let it through:
//! what the operation then does is the other tests' business. Allowed
//! cells run on a world of their own, since they may change it.

mod support;

use axum::http::StatusCode;
use base64::Engine;
use floe_auth::Role;
use jsonwebtoken::{EncodingKey, Header};
use serde_json::{Value, json};
use support::{AUDIENCE, ISSUER, SECRET, TestResult, api, roles_token};

type Error = Box<dyn std::error::Error>;

const ACME: &str = "acme";
const GLOBEX: &str = "globex";
const REPOSITORY: &str = "backups";
const METHODS: [&str; 6] = ["get", "head", "post", "put", "delete", "patch"];
const ORG_HEADER: &str = "x-floe-organization";

/// One operation as the document states it.
struct Operation {
    method: String,
    template: String,
    roles: Vec<Role>,
    body: Option<Value>,
    /// A `PUT` that creates what it names when it is not there.
    upsert: bool,
}

impl Operation {
    fn name(&self) -> String {
        format!("{} {}", self.method, self.template)
    }

    fn allows(&self, roles: &[Role]) -> bool {
        roles.iter().any(|r| self.roles.contains(r))
    }

    /// Whether the path names one resource, which belongs to one
    /// organization: another organization's name must not reach it. (An
    /// upsert of that name creates the caller's own instead, which the
    /// repository tests cover.)
    fn org_scoped(&self) -> bool {
        !self.upsert
            && (self.template.contains("{id}") || self.template.contains("/repositories/{name}"))
    }

    /// The path with the ids of `ids` in place of its parameters.
    fn path(&self, ids: &Ids) -> String {
        let id = if self.template.starts_with("/api/v1/snapshot-policies") {
            &ids.policy
        } else {
            &ids.deployment
        };
        let name = if self.template.contains("/repositories/") {
            ids.repository
        } else {
            "nightly-1"
        };
        self.template
            .replace("{id}", id)
            .replace("{name}", name)
            .replace("{ref_id}", "main-elasticsearch")
            .replace("{path}", "_cluster/health")
    }
}

/// Every operation that needs a token, from the document the API serves.
fn operations() -> Result<Vec<Operation>, Error> {
    let doc: Value = serde_json::from_str(&floe_api::openapi_json())?;
    let mut out = Vec::new();
    for (template, item) in doc["paths"].as_object().ok_or("no paths")? {
        for (method, op) in item.as_object().ok_or("a path item is not an object")? {
            if !METHODS.contains(&method.as_str()) {
                continue;
            }
            let secured = op["security"]
                .as_array()
                .is_some_and(|s| s.iter().any(|r| r.get("bearer").is_some()));
            if !secured {
                continue;
            }
            let roles = op["x-floe-roles"]
                .as_array()
                .ok_or_else(|| {
                    format!("{method} {template} does not say who may call it (x-floe-roles)")
                })?
                .iter()
                .map(|r| {
                    r.as_str()
                        .and_then(Role::parse)
                        .ok_or_else(|| format!("{method} {template}: {r} is not a role"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            out.push(Operation {
                method: method.to_uppercase(),
                template: template.clone(),
                roles,
                body: op["requestBody"]["content"]["application/json"]["example"]
                    .as_object()
                    .map(|o| Value::Object(o.clone())),
                upsert: method == "put" && op["responses"].get("201").is_some(),
            });
        }
    }
    Ok(out)
}

/// What one organization holds in a world.
struct Ids {
    deployment: String,
    policy: String,
    /// A repository only this organization has.
    repository: &'static str,
}

/// A fresh API with, in each of two organizations, a repository of the same
/// name, one of its own, a policy and a deployment.
struct World {
    api: support::Api,
    acme: Ids,
    globex: Ids,
}

async fn world() -> Result<World, Error> {
    let api = api()?;
    let mut ids = Vec::new();
    for (org, own) in [(ACME, "acme-archive"), (GLOBEX, "globex-archive")] {
        for name in [REPOSITORY, own] {
            let repo = api
                .admin_of(
                    org,
                    "PUT",
                    &format!("/api/v1/platform/configuration/snapshots/repositories/{name}"),
                    Some(json!({"type": "s3", "settings": {"bucket": format!("{org}-{name}"), "endpoint": "1.2.3.4",
                        "protocol": "http", "access_key": "AKIAFLOETEST1234", "secret_key": "s3cr3t"}})),
                )
                .await?;
            assert_eq!(repo.status, StatusCode::CREATED, "{}", repo.body);
        }
        let policy = api
            .admin_of(
                org,
                "POST",
                "/api/v1/snapshot-policies",
                Some(json!({"name": "nightly", "schedule": {"interval": "1d"},
                    "snapshot_name": "<nightly-{now/d}>", "repository": REPOSITORY,
                    "retention": {"expire_after": "30d", "min_count": 1, "max_count": 10}})),
            )
            .await?;
        assert_eq!(policy.status, StatusCode::CREATED, "{}", policy.body);
        let deployment = api
            .admin_of(
                org,
                "POST",
                "/api/v1/deployments",
                Some(json!({"name": format!("{org}-logs"), "version": "8.15.3",
                    "node_groups": [{"id": "hot", "roles": ["master", "data_hot", "data_content"],
                        "instance_type": "m6g.xlarge", "count": 1, "zone_count": 1,
                        "storage": {"size_gb": 50}}]})),
            )
            .await?;
        assert_eq!(
            deployment.status,
            StatusCode::CREATED,
            "{}",
            deployment.body
        );
        ids.push(Ids {
            deployment: deployment.body["id"].as_str().ok_or("id")?.to_string(),
            policy: policy.body["id"].as_str().ok_or("id")?.to_string(),
            repository: own,
        });
    }
    let globex = ids.pop().ok_or("globex")?;
    let acme = ids.pop().ok_or("acme")?;
    Ok(World { api, acme, globex })
}

impl World {
    /// Everything a reader of either organization can see, versions included.
    async fn fingerprint(&self) -> Result<String, Error> {
        let mut seen = Vec::new();
        for org in [ACME, GLOBEX] {
            let repos = self
                .api
                .admin_of(
                    org,
                    "GET",
                    "/api/v1/platform/configuration/snapshots/repositories",
                    None,
                )
                .await?;
            seen.push(repos.body.to_string());
            for path in [
                "/api/v1/deployments?size=100",
                "/api/v1/snapshot-policies?size=100",
            ] {
                let list = self.api.admin_of(org, "GET", path, None).await?;
                seen.push(list.body.to_string());
                for item in list.body["items"].as_array().into_iter().flatten() {
                    let Some(id) = item["id"].as_str() else {
                        continue;
                    };
                    let base = path.split('?').next().unwrap_or(path);
                    let one = self
                        .api
                        .admin_of(org, "GET", &format!("{base}/{id}"), None)
                        .await?;
                    seen.push(format!("{} {}", one.etag(), one.body));
                    if base == "/api/v1/deployments" {
                        let plans = self
                            .api
                            .admin_of(org, "GET", &format!("{base}/{id}/plans"), None)
                            .await?;
                        seen.push(plans.body.to_string());
                    }
                }
            }
        }
        Ok(seen.join("\n"))
    }
}

/// What a cell expects.
enum Expect {
    /// Refused with this status and one of these codes, changing nothing.
    Refused(StatusCode, &'static [&'static str]),
    /// Let through: any answer but 401 or 403.
    Allowed,
}

/// How a cell's caller proves who it is.
enum Auth {
    /// `Authorization: Bearer {token}`, or no header.
    Token(Option<String>),
    /// This `Authorization` header as it is.
    Header(&'static str),
    /// An API key made, in the cell's world, by a token of `org` with
    /// `roles`, with all of them.
    Key { org: &'static str, roles: Vec<Role> },
}

struct Cell {
    name: String,
    auth: Auth,
    org_header: Option<&'static str>,
    /// The organization whose ids fill the path.
    target: &'static str,
    expect: Expect,
}

const FORBIDDEN: Expect = Expect::Refused(StatusCode::FORBIDDEN, &["auth.forbidden"]);

fn role_cell(
    op: &Operation,
    name: String,
    token_org: &str,
    roles: &[Role],
    header: Option<&'static str>,
) -> Cell {
    // Outside its own organization a token holds only its platform roles.
    let effective: Vec<Role> = if header.is_some_and(|h| h != token_org) {
        roles
            .iter()
            .copied()
            .filter(|r| matches!(r, Role::PlatformAdmin | Role::PlatformViewer))
            .collect()
    } else {
        roles.to_vec()
    };
    Cell {
        name,
        auth: Auth::Token(Some(roles_token(token_org, roles))),
        org_header: header,
        target: ACME,
        expect: if op.allows(&effective) {
            Expect::Allowed
        } else {
            FORBIDDEN
        },
    }
}

/// As [`role_cell`], with an API key of the roles instead of a token: the
/// key is allowed what the token is, but making keys.
fn key_cell(
    op: &Operation,
    name: String,
    key_org: &'static str,
    roles: &[Role],
    header: Option<&'static str>,
) -> Cell {
    let as_token = role_cell(op, name, key_org, roles, header);
    let makes_keys = op.method == "POST" && op.template == "/api/v1/users/auth/keys";
    Cell {
        auth: Auth::Key {
            org: key_org,
            roles: roles.to_vec(),
        },
        expect: if makes_keys {
            FORBIDDEN
        } else {
            as_token.expect
        },
        ..as_token
    }
}

/// The `Authorization` header of `auth` in `world` (a key is made there).
async fn authorization(world: &World, auth: &Auth) -> Result<Option<String>, Error> {
    Ok(match auth {
        Auth::Token(token) => token.as_ref().map(|t| format!("Bearer {t}")),
        Auth::Header(header) => Some((*header).to_string()),
        Auth::Key { org, roles } => {
            let made = world
                .api
                .call(
                    "POST",
                    "/api/v1/users/auth/keys",
                    Some(&roles_token(org, roles)),
                    &[],
                    Some(json!({"description": "authorization matrix"})),
                )
                .await?;
            assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
            Some(format!(
                "ApiKey {}",
                made.body["key"].as_str().ok_or("no key")?
            ))
        }
    })
}

/// Runs the cells of every operation; returns how many ran.
async fn run(cells_of: impl Fn(&Operation) -> Vec<Cell>) -> Result<usize, Error> {
    let ops = operations()?;
    assert!(
        ops.len() >= 30,
        "the document lists {} secured operations",
        ops.len()
    );
    let mut count = 0;
    for op in &ops {
        let cells = cells_of(op);
        count += cells.len();
        let shared = world().await?;
        let before = shared.fingerprint().await?;
        for cell in cells {
            let fresh;
            let world = match cell.expect {
                Expect::Refused(..) => &shared,
                Expect::Allowed => {
                    fresh = world().await?;
                    &fresh
                }
            };
            let ids = if cell.target == ACME {
                &world.acme
            } else {
                &world.globex
            };
            let authorization = authorization(world, &cell.auth).await?;
            let mut headers: Vec<(&str, &str)> = cell
                .org_header
                .map(|o| (ORG_HEADER, o))
                .into_iter()
                .collect();
            if let Some(a) = &authorization {
                headers.push(("authorization", a));
            }
            let path = op.path(ids);
            let reply = world
                .api
                .call(&op.method, &path, None, &headers, op.body.clone())
                .await?;
            let at = format!(
                "{} as {}: {} {}",
                op.name(),
                cell.name,
                reply.status,
                reply.body
            );
            match cell.expect {
                Expect::Refused(status, codes) => {
                    assert_eq!(reply.status, status, "{at}");
                    // A HEAD answer carries no body, so no code either.
                    if op.method != "HEAD" {
                        assert!(
                            codes.contains(&reply.code())
                                || codes
                                    .iter()
                                    .any(|c| c.starts_with('*') && reply.code().ends_with(&c[1..])),
                            "{at}: expected one of {codes:?}"
                        );
                    }
                    assert_eq!(
                        shared.fingerprint().await?,
                        before,
                        "{at} changed what readers see"
                    );
                }
                Expect::Allowed => {
                    assert!(
                        !matches!(
                            reply.status,
                            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
                        ),
                        "{at}: the roles {:?} may call it",
                        op.roles
                    );
                }
            }
        }
    }
    Ok(count)
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn claims(aud: &str, iss: &str, exp: i64) -> Value {
    json!({"sub": "mallory", "org": ACME, "roles": ["platform_admin"], "iss": iss, "aud": aud,
        "iat": now() - 60, "exp": exp})
}

fn signed(claims: &Value, secret: &[u8]) -> Result<String, Error> {
    Ok(jsonwebtoken::encode(
        &Header::default(),
        claims,
        &EncodingKey::from_secret(secret)?,
    )?)
}

fn unsigned(claims: &Value) -> String {
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT"})),
        b64(claims)
    )
}

#[test]
fn every_secured_operation_says_who_may_call_it() -> TestResult {
    for op in operations()? {
        assert!(!op.roles.is_empty(), "{} names no role", op.name());
        // Whoever may change something may also read it.
        assert!(
            op.allows(&[Role::PlatformAdmin]),
            "{}: platform_admin may do everything",
            op.name()
        );
    }
    Ok(())
}

#[tokio::test]
async fn every_operation_refuses_a_missing_or_bad_token() -> TestResult {
    let late = now() + 600;
    // A token (`Ok`) or a header as it is (`Err`).
    type Credential = Result<Option<String>, &'static str>;
    let tokens: Vec<(&str, Credential, &'static [&'static str])> = vec![
        ("no token", Ok(None), &["auth.missing_token"]),
        (
            "a malformed token",
            Ok(Some("not-a-jwt".into())),
            &["auth.invalid_token"],
        ),
        (
            "an expired token",
            Ok(Some(signed(
                &claims(AUDIENCE, ISSUER, now() - 3600),
                SECRET,
            )?)),
            &["auth.token_expired"],
        ),
        (
            "another audience's token",
            Ok(Some(signed(&claims("another-api", ISSUER, late), SECRET)?)),
            &["auth.wrong_audience"],
        ),
        (
            "another issuer's token",
            Ok(Some(signed(
                &claims(AUDIENCE, "someone-else", late),
                SECRET,
            )?)),
            &["auth.wrong_issuer"],
        ),
        (
            "a token signed with another key",
            Ok(Some(signed(
                &claims(AUDIENCE, ISSUER, late),
                b"another-hs256-secret-0123456789abcdefgh",
            )?)),
            &["auth.bad_signature"],
        ),
        (
            "an unsigned token (alg: none)",
            Ok(Some(unsigned(&claims(AUDIENCE, ISSUER, late)))),
            &["auth.unsupported_algorithm"],
        ),
        (
            "an API key this platform never made",
            Err("ApiKey YWNtZTowMTkzYTBjNGQyYjg3YzNlOWE0YjVjNmQ3ZThmOWEwZTpub3QtYS1rZXk"),
            &["auth.invalid_api_key"],
        ),
        ("an empty API key", Err("ApiKey "), &["auth.missing_token"]),
        (
            "another scheme",
            Err("Basic ZWxhc3RpYzpjaGFuZ2VtZQ"),
            &["auth.missing_token"],
        ),
    ];
    let cells = run(|_| {
        tokens
            .iter()
            .map(|(name, auth, codes)| Cell {
                name: (*name).to_string(),
                auth: match auth {
                    Ok(token) => Auth::Token(token.clone()),
                    Err(header) => Auth::Header(header),
                },
                org_header: None,
                target: ACME,
                expect: Expect::Refused(StatusCode::UNAUTHORIZED, codes),
            })
            .collect()
    })
    .await?;
    eprintln!("{cells} cells of bad tokens");
    Ok(())
}

#[tokio::test]
async fn every_operation_takes_the_roles_it_names_alone_and_combined() -> TestResult {
    let cells = run(|op| {
        let mut cells = Vec::new();
        for (i, a) in Role::ALL.iter().enumerate() {
            cells.push(role_cell(op, a.to_string(), ACME, &[*a], None));
            for b in &Role::ALL[i + 1..] {
                cells.push(role_cell(op, format!("{a} + {b}"), ACME, &[*a, *b], None));
            }
        }
        cells
    })
    .await?;
    eprintln!("{cells} cells of roles in their own organization");
    Ok(())
}

#[tokio::test]
async fn outside_its_organization_a_token_holds_only_its_platform_roles() -> TestResult {
    let sets: [&[Role]; 8] = [
        &[Role::PlatformViewer],
        &[Role::PlatformAdmin],
        &[Role::PlatformViewer, Role::DeploymentManager],
        &[Role::PlatformViewer, Role::DeploymentViewer],
        &[Role::PlatformAdmin, Role::DeploymentViewer],
        &[Role::DeploymentManager],
        &[Role::DeploymentViewer],
        &[Role::DeploymentManager, Role::DeploymentViewer],
    ];
    let cells = run(|op| {
        let mut cells: Vec<Cell> = sets
            .iter()
            .map(|roles| {
                let names: Vec<&str> = roles.iter().map(|r| r.as_str()).collect();
                role_cell(
                    op,
                    format!("{} of globex in acme", names.join(" + ")),
                    GLOBEX,
                    roles,
                    Some(ACME),
                )
            })
            .collect();
        if op.org_scoped() {
            // Every role, but the id is another organization's.
            cells.push(Cell {
                name: "acme's every role on globex's resource".into(),
                auth: Auth::Token(Some(roles_token(ACME, &Role::ALL))),
                org_header: None,
                target: GLOBEX,
                expect: Expect::Refused(StatusCode::NOT_FOUND, &["*_not_found"]),
            });
        }
        cells
    })
    .await?;
    eprintln!("{cells} cells across organizations");
    Ok(())
}

#[tokio::test]
async fn an_api_key_is_allowed_what_a_token_of_its_roles_is_but_making_keys() -> TestResult {
    let cells = run(|op| {
        let mut cells: Vec<Cell> = Role::ALL
            .iter()
            .map(|r| key_cell(op, format!("a key of {r}"), ACME, &[*r], None))
            .collect();
        for r in [Role::PlatformAdmin, Role::PlatformViewer] {
            cells.push(key_cell(
                op,
                format!("a key of globex's {r} in acme"),
                GLOBEX,
                &[r],
                Some(ACME),
            ));
        }
        cells.push(key_cell(
            op,
            "a key of globex's deployment_manager in acme".into(),
            GLOBEX,
            &[Role::DeploymentManager],
            Some(ACME),
        ));
        cells
    })
    .await?;
    eprintln!("{cells} cells of API keys");
    Ok(())
}
