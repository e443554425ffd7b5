//! `dynamo-baseline`: answers every HTTP event with one page of an
//! organization's deployments, read with one DynamoDB Query through the
//! same store adapter, SDK and settings as the api function. The api's
//! first answer to `GET /api/v1/deployments` is that Query plus the router,
//! token checks and everything else Floe does; the cold-start benchmark
//! prints both so the difference is what Floe adds.

use floe_store::{Filter, PageRequest};
use floe_wiring::{Env, StoreChoice, build};
use lambda_http::{Body, Error, Request, Response, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let sdk = floe_wiring::aws().await;
    let store = build::store(&StoreChoice::read_table(&Env::process())?, sdk.into()).await?;
    let store = &store;
    lambda_http::run(service_fn(move |_request: Request| async move {
        let page = store
            .list_deployments(
                "acme",
                Filter::default(),
                &PageRequest {
                    size: Some(20),
                    cursor: None,
                },
            )
            .await?;
        Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .body(Body::from(
                serde_json::json!({"deployments": page.items.len()}).to_string(),
            ))
            .map_err(Error::from)
    }))
    .await
}
