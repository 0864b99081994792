// Error translation: library Error -> the Python exception classes of safeweights/_errors.py.
#include <string>

#include "bindings.h"
#include "safeweights/http.h"

namespace safeweights::python {
namespace {

// The classes live in Python (so they can derive from huggingface_hub's and zipfile's) and are handed
// to the module once at import. Leaked on purpose: they must outlive every call, including calls made
// while the interpreter shuts down.
struct ErrorClasses {
  py::object safetensor, dduf_corrupted, dduf_export, dduf_invalid_name, dduf_bad_zip, environment_fault;
};
ErrorClasses* classes = nullptr;

// Messages from the library are valid UTF-8 except where they quote input bytes; never fail on those.
py::str to_str(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "backslashreplace");
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

py::object make_exception(const py::object& cls, const std::string& message, const Error* error) {
  py::object exc = cls(to_str(message));  // messages may quote non-UTF-8 input bytes
  if (error != nullptr) {
    const ErrorContext& c = error->context();
    exc.attr("kind") = std::string(error->kind_name());
    exc.attr("rule") =
        error->rule() == ErrorRule::Unspecified ? py::object(py::none()) : py::object(py::str(std::string(error_rule_code(error->rule()))));
    exc.attr("file") = c.file.empty() ? py::object(py::none()) : py::object(to_str(c.file));
    exc.attr("entry") = c.entry.empty() ? py::object(py::none()) : py::object(to_str(c.entry));
    exc.attr("tensor") = c.tensor.empty() ? py::object(py::none()) : py::object(to_str(c.tensor));
    exc.attr("offset") = c.offset ? py::object(py::int_(*c.offset)) : py::object(py::none());
  }
  return exc;
}

[[noreturn]] void throw_exception(const py::object& exc, const py::object* cause = nullptr) {
  if (cause != nullptr) {
    // PyException_SetCause steals a reference; __suppress_context__ is set as `raise ... from` does.
    PyException_SetCause(exc.ptr(), cause->inc_ref().ptr());
  }
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

bool remote_failure(const Error& error) {
  switch (error.kind()) {
    case ErrorKind::HttpError:
    case ErrorKind::RemoteChanged:
    case ErrorKind::Timeout: return true;
    case ErrorKind::IoError: return is_url(error.context().file);
    default: return false;
  }
}

}  // namespace

Domain read_domain(const Format& format) { return format.has_members() ? Domain::DDUFRead : Domain::Safetensors; }

void raise_error(const Error& error, Domain domain, std::string_view prefix) {
  if (classes == nullptr) throw std::runtime_error("safeweights: error classes not registered");
  const ErrorContext& c = error.context();
  // A Python exception already pending on this thread wins: the signal handler's KeyboardInterrupt
  // that stopped the operation with Interrupted (the cancellation poll, module.cpp), or a warning
  // turned into an error. Raise it unchanged.
  if (PyErr_Occurred() != nullptr) throw py::error_already_set();
  // Files that cannot be opened raise the builtin exceptions callers already catch.
  if (error.kind() == ErrorKind::FileNotFound) {
    PyErr_SetObject(PyExc_FileNotFoundError, to_str("No such file or directory: " + c.file).ptr());
    throw py::error_already_set();
  }
  if (error.kind() == ErrorKind::IoError && !c.file.empty() && !c.offset && c.tensor.empty() && c.entry.empty()) {
    PyErr_SetObject(PyExc_OSError, to_str(error.to_string()).ptr());
    throw py::error_already_set();
  }
  // Missing or unusable credentials or configuration are no file's fault, whatever was being done: an
  // OSError (as the network's and the disk's failures are) that is also ours, with the kind and context.
  if (error.kind() == ErrorKind::EnvironmentFault) throw_exception(make_exception(classes->environment_fault, error.to_string(), &error));
  // What a server or the network did is not a deserializing error: no "Error while deserializing
  // header: " in front of "URL: Timeout: ...".
  if (remote_failure(error)) prefix = {};
  switch (domain) {
    case Domain::Safetensors: {
      py::object exc = make_exception(classes->safetensor, std::string(prefix) + error.to_string(), &error);
      throw_exception(exc);
    }
    case Domain::DDUFRead: {
      if (error.kind() == ErrorKind::DDUFInvalidEntryName) {
        // As the hub: the corrupted-file error, caused by the entry-name error.
        py::object cause = make_exception(classes->dduf_invalid_name, error.message(), &error);
        py::object exc = make_exception(classes->dduf_corrupted, error.to_string(), &error);
        throw_exception(exc, &cause);
      }
      const py::object& cls =
          (error.kind() == ErrorKind::BadZipFile || error.kind() == ErrorKind::ZipUnsupported) ? classes->dduf_bad_zip : classes->dduf_corrupted;
      throw_exception(make_exception(cls, std::string(prefix) + error.to_string(), &error));
    }
    case Domain::DDUFExport: {
      if (error.kind() == ErrorKind::DDUFInvalidEntryName) {
        py::object cause = make_exception(classes->dduf_invalid_name, error.message(), &error);
        throw_exception(make_exception(classes->dduf_export, error.message(), &error), &cause);
      }
      if (error.kind() == ErrorKind::DDUFCorruptedFile) {
        py::object cause = make_exception(classes->dduf_corrupted, error.message(), &error);
        throw_exception(make_exception(classes->dduf_export, "Invalid DDUF file structure. " + error.message(), &error), &cause);
      }
      // The hub's messages are matched by callers: keep them first, context after.
      std::string message = error.message();
      if (!c.file.empty()) message += " (" + c.file + ")";
      throw_exception(make_exception(classes->dduf_export, message, &error));
    }
  }
  throw std::logic_error("unreachable");
}

void raise_safetensor_error(const std::string& message) {
  if (classes == nullptr) throw std::runtime_error("safeweights: error classes not registered");
  throw_exception(make_exception(classes->safetensor, message, nullptr));
}

void register_errors(py::module_& m) {
  m.def(
      "_set_error_classes",
      [](py::object safetensor, py::object corrupted, py::object bad_zip, py::object export_error, py::object invalid_name,
         py::object environment_fault) {
        if (classes == nullptr) classes = new ErrorClasses;
        *classes = {std::move(safetensor),   std::move(corrupted), std::move(export_error),
                    std::move(invalid_name), std::move(bad_zip),   std::move(environment_fault)};
      },
      py::arg("safetensor"), py::arg("dduf_corrupted"), py::arg("dduf_bad_zip"), py::arg("dduf_export"), py::arg("dduf_invalid_name"),
      py::arg("environment_fault"), "Internal: called once by safeweights/_errors.py.");
  py::list kinds;
  for (int i = 0;; ++i) {
    std::string_view name = error_kind_name(static_cast<ErrorKind>(i));
    if (name.empty() || name == "Unknown") break;
    kinds.append(py::str(std::string(name)));
  }
  m.attr("ERROR_KINDS") = py::tuple(kinds);
}

}  // namespace safeweights::python
