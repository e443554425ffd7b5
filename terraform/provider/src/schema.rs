//! Short constructors of schema attributes, so that each resource's schema
//! reads as a table of names, types, constraints and descriptions.

use std::collections::HashMap;
use tf_provider::schema::{
    Attribute, AttributeConstraint, AttributeType, Block, Description, NestedBlock,
};

pub fn attr(
    attr_type: AttributeType,
    constraint: AttributeConstraint,
    description: &str,
) -> Attribute {
    Attribute {
        attr_type,
        description: Description::markdown(description),
        constraint,
        sensitive: false,
        deprecated: false,
    }
}

pub fn required(t: AttributeType, d: &str) -> Attribute {
    attr(t, AttributeConstraint::Required, d)
}

pub fn optional(t: AttributeType, d: &str) -> Attribute {
    attr(t, AttributeConstraint::Optional, d)
}

/// Optional, with the platform's value when the configuration has none.
pub fn defaulted(t: AttributeType, d: &str) -> Attribute {
    attr(t, AttributeConstraint::OptionalComputed, d)
}

pub fn computed(t: AttributeType, d: &str) -> Attribute {
    attr(t, AttributeConstraint::Computed, d)
}

pub fn sensitive(mut a: Attribute) -> Attribute {
    a.sensitive = true;
    a
}

pub fn string() -> AttributeType {
    AttributeType::String
}

pub fn number() -> AttributeType {
    AttributeType::Number
}

pub fn bool() -> AttributeType {
    AttributeType::Bool
}

pub fn strings() -> AttributeType {
    AttributeType::List(Box::new(AttributeType::String))
}

pub fn string_map() -> AttributeType {
    AttributeType::Map(Box::new(AttributeType::String))
}

pub fn block(
    description: &str,
    attributes: Vec<(&str, Attribute)>,
    blocks: Vec<(&str, NestedBlock)>,
) -> Block {
    Block {
        version: 1,
        attributes: attributes
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<HashMap<_, _>>(),
        blocks: blocks
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        description: Description::markdown(description),
        deprecated: false,
    }
}

/// A list of computed objects (a data source's results).
pub fn computed_objects(description: &str, attributes: Vec<(&str, Attribute)>) -> Attribute {
    // A list of objects as a plain type: Terraform refuses an attribute
    // with both a type and nested attributes, which tf-provider sends for
    // its nested-attribute kinds.
    computed(
        AttributeType::List(Box::new(AttributeType::Object(
            attributes
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.attr_type))
                .collect(),
        ))),
        description,
    )
}
