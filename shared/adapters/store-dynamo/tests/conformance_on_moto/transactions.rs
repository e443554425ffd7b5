//! The test endpoint keeps DynamoDB's all-or-nothing transactions. The
//! moto that scripts/test.sh starts (scripts/moto_serial.py) backs up the
//! items a TransactWriteItems names instead of copying their tables, and
//! puts exactly those back when the transaction is cancelled: the store's
//! conformance suite relies on it, so it is held here to DynamoDB's rules
//! directly, through the real `aws-sdk-dynamodb` client. A cancelled
//! transaction leaves every item it named as it was (updated, put, deleted,
//! on a table with a sort key and one without), one that names an item
//! twice is refused whole, and a committed one writes all it names.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, ConditionCheck, Delete, KeySchemaElement,
    KeyType, Put, ScalarAttributeType, TransactWriteItem, Update,
};
use floe_domain::names::new_resource_id;
use std::collections::HashMap;

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error>>;
type Item = HashMap<String, AttributeValue>;

fn client() -> TestResult<Client> {
    Ok(Client::new(&super::moto_sdk()?))
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_string())
}

fn item(pairs: &[(&str, &str)]) -> Item {
    pairs.iter().map(|(k, v)| (k.to_string(), s(v))).collect()
}

/// A key column of type string.
fn key(name: &str, kind: KeyType) -> TestResult<(KeySchemaElement, AttributeDefinition)> {
    Ok((
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()?,
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()?,
    ))
}

/// A fresh table keyed by `pk`, and by `sk` too when `sorted`.
async fn table(db: &Client, sorted: bool) -> TestResult<String> {
    let name = format!("floe-tx-{}", new_resource_id());
    let mut columns = vec![key("pk", KeyType::Hash)?];
    if sorted {
        columns.push(key("sk", KeyType::Range)?);
    }
    let (schema, attributes) = columns.into_iter().unzip();
    db.create_table()
        .table_name(&name)
        .billing_mode(BillingMode::PayPerRequest)
        .set_key_schema(Some(schema))
        .set_attribute_definitions(Some(attributes))
        .send()
        .await?;
    Ok(name)
}

/// Every item of the tables, in one order, to compare before and after.
async fn contents(db: &Client, tables: &[&str]) -> TestResult<Vec<String>> {
    let mut all = Vec::new();
    for t in tables {
        let scanned = db.scan().table_name(*t).send().await?;
        for i in scanned.items() {
            let mut pairs: Vec<String> = i.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
            pairs.sort();
            all.push(format!("{t}: {}", pairs.join(", ")));
        }
    }
    all.sort();
    Ok(all)
}

fn put(table: &str, it: Item) -> TestResult<TransactWriteItem> {
    Ok(TransactWriteItem::builder()
        .put(
            Put::builder()
                .table_name(table)
                .set_item(Some(it))
                .build()?,
        )
        .build())
}

fn update(table: &str, key: Item, value: &str) -> TestResult<TransactWriteItem> {
    Ok(TransactWriteItem::builder()
        .update(
            Update::builder()
                .table_name(table)
                .set_key(Some(key))
                .update_expression("SET v = :v")
                .expression_attribute_values(":v", s(value))
                .build()?,
        )
        .build())
}

fn delete(table: &str, key: Item) -> TestResult<TransactWriteItem> {
    Ok(TransactWriteItem::builder()
        .delete(
            Delete::builder()
                .table_name(table)
                .set_key(Some(key))
                .build()?,
        )
        .build())
}

/// A check that fails: the item does not exist.
fn missing(table: &str, key: Item) -> TestResult<TransactWriteItem> {
    Ok(TransactWriteItem::builder()
        .condition_check(
            ConditionCheck::builder()
                .table_name(table)
                .set_key(Some(key))
                .condition_expression("attribute_exists(pk)")
                .build()?,
        )
        .build())
}

#[tokio::test]
async fn a_cancelled_transaction_leaves_every_item_it_named_as_it_was() -> TestResult {
    let db = client()?;
    let sorted = table(&db, true).await?;
    let plain = table(&db, false).await?;
    db.put_item()
        .table_name(&sorted)
        .set_item(Some(item(&[("pk", "a"), ("sk", "1"), ("v", "old")])))
        .send()
        .await?;
    db.put_item()
        .table_name(&plain)
        .set_item(Some(item(&[("pk", "x"), ("v", "old")])))
        .send()
        .await?;
    let before = contents(&db, &[&sorted, &plain]).await?;

    let cancelled: Vec<(&str, Vec<TransactWriteItem>)> = vec![
        (
            "an update, a put and a delete before a failed check",
            vec![
                update(&sorted, item(&[("pk", "a"), ("sk", "1")]), "new")?,
                put(&sorted, item(&[("pk", "b"), ("sk", "1")]))?,
                delete(&plain, item(&[("pk", "x")]))?,
                missing(&plain, item(&[("pk", "nope")]))?,
            ],
        ),
        (
            "a failed check first, then writes",
            vec![
                missing(&sorted, item(&[("pk", "a"), ("sk", "2")]))?,
                put(&plain, item(&[("pk", "y")]))?,
                update(&plain, item(&[("pk", "x")]), "new")?,
            ],
        ),
        (
            "writes around an item without its sort key",
            vec![
                put(&plain, item(&[("pk", "z")]))?,
                put(&sorted, item(&[("pk", "c")]))?,
                delete(&sorted, item(&[("pk", "a"), ("sk", "1")]))?,
            ],
        ),
        (
            "one item named twice",
            vec![
                put(&plain, item(&[("pk", "w")]))?,
                update(&plain, item(&[("pk", "w")]), "twice")?,
            ],
        ),
    ];
    for (case, items) in cancelled {
        let answer = db
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await;
        assert!(answer.is_err(), "{case}: committed");
        assert_eq!(
            contents(&db, &[&sorted, &plain]).await?,
            before,
            "{case}: the items are not as they were"
        );
    }

    // Committed: every write lands.
    db.transact_write_items()
        .set_transact_items(Some(vec![
            update(&sorted, item(&[("pk", "a"), ("sk", "1")]), "new")?,
            put(&sorted, item(&[("pk", "b"), ("sk", "1")]))?,
            delete(&plain, item(&[("pk", "x")]))?,
        ]))
        .send()
        .await?;
    assert_eq!(
        contents(&db, &[&sorted, &plain]).await?,
        vec![
            format!(r#"{sorted}: pk=S("a"), sk=S("1"), v=S("new")"#),
            format!(r#"{sorted}: pk=S("b"), sk=S("1")"#),
        ]
    );
    Ok(())
}
