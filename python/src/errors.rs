//! The exception hierarchy: `MnemoError` for everything that stops the store itself, with a
//! subclass per cause so callers can tell a locked store from a damaged one. A call the model got
//! wrong is never an exception: it is an error `tool_result`.

use mnemo::Error;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;

create_exception!(
    mnemo,
    MnemoError,
    PyException,
    "Base class of every error Mnemo raises; the message says what to do."
);
create_exception!(
    mnemo,
    StoreLockedError,
    MnemoError,
    "The store is open in another process."
);
create_exception!(
    mnemo,
    StoreNotFoundError,
    MnemoError,
    "A store that must exist does not."
);
create_exception!(
    mnemo,
    NewerFormatError,
    MnemoError,
    "The store was written by a newer Mnemo."
);
create_exception!(
    mnemo,
    CorruptStoreError,
    MnemoError,
    "The store's bytes are damaged, or the log was rolled back under the recorded head."
);
create_exception!(
    mnemo,
    StorePoisonedError,
    MnemoError,
    "An earlier storage failure poisoned the store; reopen it to recover."
);
create_exception!(
    mnemo,
    StorageError,
    MnemoError,
    "The disk or the store's writer failed."
);
create_exception!(
    mnemo,
    InvalidArgumentError,
    MnemoError,
    "An argument given to the library (not by the model) was not valid."
);
create_exception!(mnemo, ClosedError, MnemoError, "The store was closed.");
create_exception!(
    mnemo,
    ServerError,
    MnemoError,
    "The server a RemoteClient talks to could not be reached, refused the request, or answered in a way the client cannot read."
);

/// The Python exception for a store error, carrying the Rust message.
pub fn to_py_err(e: Error) -> PyErr {
    let message = e.to_string();
    match e {
        Error::Locked { .. } | Error::NotLocal { .. } => StoreLockedError::new_err(message),
        Error::Server { .. } => ServerError::new_err(message),
        Error::NotFound { .. } => StoreNotFoundError::new_err(message),
        Error::NewerFormat { .. } => NewerFormatError::new_err(message),
        Error::Corrupt { .. } | Error::UnsafeFile { .. } | Error::ChainBroken { .. } => {
            CorruptStoreError::new_err(message)
        }
        Error::Poisoned { .. } => StorePoisonedError::new_err(message),
        Error::InvalidArgument(_) => InvalidArgumentError::new_err(message),
        _ => StorageError::new_err(message),
    }
}

/// A count, size or seq given from Python as argument `name`: an `int` from 0 to 2**64 - 1.
/// Anything else is a `ValueError` (a negative or too large `int`, where PyO3's own conversion
/// raises a bare `OverflowError`) or a `TypeError` (not an `int`) that names the argument, what
/// it is for and what is valid.
pub fn whole_number(value: &Bound<'_, PyAny>, name: &str, what: &str) -> PyResult<u64> {
    let valid = format!("{name} is {what}: a whole number from 0 to {}", u64::MAX);
    if value.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err(format!("{valid}, not a bool")));
    }
    let Ok(number) = value.extract::<i128>() else {
        let kind = value
            .get_type()
            .name()
            .map_or_else(|_| "?".to_string(), |n| n.to_string());
        return Err(PyTypeError::new_err(format!("{valid}, got a {kind}")));
    };
    u64::try_from(number).map_err(|_| PyValueError::new_err(format!("{valid}, got {number}")))
}

/// [`whole_number`] for an argument that may be `None`.
pub fn optional_whole_number(
    value: Option<&Bound<'_, PyAny>>,
    name: &str,
    what: &str,
) -> PyResult<Option<u64>> {
    value
        .filter(|v| !v.is_none())
        .map(|v| whole_number(v, name, what))
        .transpose()
}

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("MnemoError", py.get_type::<MnemoError>())?;
    m.add("StoreLockedError", py.get_type::<StoreLockedError>())?;
    m.add("StoreNotFoundError", py.get_type::<StoreNotFoundError>())?;
    m.add("NewerFormatError", py.get_type::<NewerFormatError>())?;
    m.add("CorruptStoreError", py.get_type::<CorruptStoreError>())?;
    m.add("StorePoisonedError", py.get_type::<StorePoisonedError>())?;
    m.add("StorageError", py.get_type::<StorageError>())?;
    m.add(
        "InvalidArgumentError",
        py.get_type::<InvalidArgumentError>(),
    )?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    m.add("ServerError", py.get_type::<ServerError>())?;
    Ok(())
}
