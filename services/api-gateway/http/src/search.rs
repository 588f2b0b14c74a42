//! `/v1/search` (prefix search of ids) and `/v1/search/fuzzy` (fuzzy search
//! of names), answered as Nomad's `SearchResponse` and
//! `FuzzySearchResponse`: `Matches` and `Truncations` per context, with the
//! query metadata. Both are blocking queries, and with ACLs on answer only
//! what the caller's token may read (see [`caravan_gateway_core::search`]).

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Query as QueryString, State};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::render::index;
use crate::{ApiError, ApiResult, Http, Params, decode, query, read_answer};
use caravan_gateway_core::acl::Caller;
use caravan_gateway_core::query as blocking;
use caravan_gateway_core::search::{self, Context, FUZZY_MIN_TERM, Searched};

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct PrefixRequest {
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    context: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct FuzzyRequest {
    #[serde(default)]
    text: String,
    #[serde(default)]
    context: String,
}

/// The contexts `name` asks for that the caller may search in the
/// request's namespace.
fn contexts(
    name: &str,
    caller: Option<&Caller>,
    q: &blocking::Query,
) -> Result<Vec<Context>, ApiError> {
    let requested = Context::expand(name).ok_or_else(|| {
        ApiError::field(
            "Context",
            format!("context must be one of {}; got {name:?}", Context::names()),
        )
    })?;
    Ok(search::permitted(
        caller.map(|c| &*c.acl),
        &q.namespace,
        requested,
    )?)
}

/// The answer body with Nomad's `QueryMeta` fields beside the results.
fn answer(
    http: &Http,
    meta: &caravan_proto::QueryMeta,
    matches: Value,
    truncations: Value,
) -> ApiResult {
    let contact = http.gw.leader_contact();
    Ok(read_answer(
        meta,
        json!({
            "Matches": matches,
            "Truncations": truncations,
            "Index": index(meta.revision),
            "LastContact": contact.last_contact_ms,
            "KnownLeader": contact.known,
        }),
    ))
}

/// The names of the namespaces that exist, read only when the search looks
/// through them (they are stored outside the cache).
async fn namespace_names(http: &Http, contexts: &[Context]) -> Result<Vec<String>, ApiError> {
    if !contexts.contains(&Context::Namespaces) {
        return Ok(Vec::new());
    }
    let (list, _) = caravan_gateway_core::namespaces::list(&http.gw, "").await?;
    Ok(list.into_iter().map(|ns| ns.name).collect())
}

async fn prefix_search(
    http: &Http,
    p: &Params,
    caller: Option<&Caller>,
    req: PrefixRequest,
) -> ApiResult {
    let q = query(http, p)?;
    let contexts = contexts(&req.context, caller, &q)?;
    let snap = blocking::block(&http.gw, &q).await;
    let acl = caller.map(|c| &*c.acl);
    let names = namespace_names(http, &contexts).await?;
    let searched = Searched {
        snap: &snap,
        namespaces: &names,
    };
    let found = search::prefix(searched, &q, acl, &req.prefix, &contexts);
    let meta = blocking::meta(&http.gw, &snap);
    answer(http, &meta, json!(found.matches), json!(found.truncations))
}

/// `POST|PUT /v1/search` with `{"Prefix": "…", "Context": "jobs"}`.
pub(crate) async fn prefix(
    State(http): State<Http>,
    QueryString(p): QueryString<Params>,
    caller: Option<Extension<Caller>>,
    body: Bytes,
) -> ApiResult {
    let req: PrefixRequest = decode(&body)?;
    prefix_search(&http, &p, caller.as_deref(), req).await
}

/// `GET /v1/search?prefix=…&context=…`: the same search with its arguments
/// in the query string, for clients that cannot send a body.
pub(crate) async fn prefix_get(
    State(http): State<Http>,
    QueryString(p): QueryString<Params>,
    caller: Option<Extension<Caller>>,
) -> ApiResult {
    let req = PrefixRequest {
        prefix: p.get("prefix").cloned().unwrap_or_default(),
        context: p.get("context").cloned().unwrap_or_default(),
    };
    prefix_search(&http, &p, caller.as_deref(), req).await
}

/// `POST|PUT /v1/search/fuzzy` with `{"Text": "…", "Context": "all"}`.
pub(crate) async fn fuzzy(
    State(http): State<Http>,
    QueryString(p): QueryString<Params>,
    caller: Option<Extension<Caller>>,
    body: Bytes,
) -> ApiResult {
    let req: FuzzyRequest = decode(&body)?;
    let q = query(&http, &p)?;
    let contexts = contexts(&req.context, caller.as_deref(), &q)?;
    let length = req.text.len();
    if length < FUZZY_MIN_TERM {
        return Err(ApiError::field(
            "Text",
            format!(
                "fuzzy search query must be at least {FUZZY_MIN_TERM} characters, got {length}"
            ),
        ));
    }
    let snap = blocking::block(&http.gw, &q).await;
    let acl = caller.as_deref().map(|c| &*c.acl);
    let names = namespace_names(&http, &contexts).await?;
    let searched = Searched {
        snap: &snap,
        namespaces: &names,
    };
    let found = search::fuzzy(searched, &q, acl, &req.text, &contexts);
    let matches: serde_json::Map<String, Value> = found
        .matches
        .iter()
        .map(|(context, list)| {
            let list: Vec<Value> = list
                .iter()
                .map(|m| {
                    // Nomad leaves out an empty scope.
                    if m.scope.is_empty() {
                        json!({"ID": m.id})
                    } else {
                        json!({"ID": m.id, "Scope": m.scope})
                    }
                })
                .collect();
            (context.to_string(), Value::Array(list))
        })
        .collect();
    let meta = blocking::meta(&http.gw, &snap);
    answer(
        &http,
        &meta,
        Value::Object(matches),
        json!(found.truncations),
    )
}
