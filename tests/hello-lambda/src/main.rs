//! `hello-lambda`: answers every HTTP event with a fixed JSON body. It links
//! what any lambda_http function links and nothing else, so the cold-start
//! benchmark can tell the runtime's own start-up from what Floe adds.

use lambda_http::{Body, Error, Request, Response, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::run(service_fn(|_request: Request| async {
        Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .body(Body::from(r#"{"hello":"world"}"#))
            .map_err(Error::from)
    }))
    .await
}
