// tests/process/fake_nvtx_tool.cpp — a stand-in for Nsight Systems: an NVTX injection
// library that writes every NVTX call it receives to a file, so that a test can read what a
// tool would have been shown.
//
// NVTX loads it when NVTX_INJECTION64_PATH names it: InitializeInjectionNvtx2 fills NVTX's
// core function table (the domain calls), InitializeInjectionNvtxExtension the payload
// extension's slots. The file is KSCOPE_FAKE_NVTX_LOG (truncated at load). With
// KSCOPE_FAKE_NVTX_NO_PAYLOAD set, the tool refuses the payload extension, as a tool that
// predates it does. One line per call, fields separated by tabs:
//
//   domain    <name>
//   category  <domain>  <id>  <name>
//   register  <domain>  <text>
//   push      <domain>  <category>  <color>  <message>  <payload>
//   pop       <domain>
//   start     <domain>  <category>  <color>  <message>  <payload>
//   end       <domain>
//   mark      <domain>  <category>  <color>  <message>  <payload>
//   schema    <domain>  <name>  <entry:type:offset:size,...>  <static size>
//   extension <module id>  payload|refused
//
// <color> is "none" or eight hex digits (ARGB); <payload> is "none", or the payload decoded
// through the registered schema (the tool knows nothing of kscope's struct): entries as
// name=value joined by ';' (doubles with 17 digits, strings up to their NUL).
#define NVTX_NO_IMPL  // types and declarations only: the program owns NVTX's implementation
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct fake_domain {
  std::string name;
};
struct fake_string {
  std::string text;
};
struct fake_schema_entry {
  std::string name;
  std::uint64_t type = 0;
  std::uint64_t flags = 0;
  std::uint64_t array_length = 0;
  std::uint64_t offset = 0;
};
struct fake_schema {
  std::uint64_t id = 0;
  std::string name;
  std::vector<fake_schema_entry> entries;
  std::size_t static_size = 0;
};

std::mutex mutex;
std::FILE* out = nullptr;
// Handles point into these; a deque never moves what it holds.
std::deque<fake_domain> domains;
std::deque<fake_string> strings;
std::vector<fake_schema> schemas;
const nvtxPayloadEntryTypeInfo_t* type_info = nullptr;  // sizes of the predefined types, from NVTX
std::size_t type_info_count = 0;

void write_line(const std::string& line) {
  if (out == nullptr) return;
  std::fputs(line.c_str(), out);
  std::fputc('\n', out);
  std::fflush(out);
}

std::string domain_name(nvtxDomainHandle_t domain) {
  return domain ? reinterpret_cast<const fake_domain*>(domain)->name : std::string("(default)");
}

std::string message_of(const nvtxEventAttributes_t* a) {
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return a->message.ascii ? a->message.ascii : "(null ascii)";
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return a->message.registered ? reinterpret_cast<const fake_string*>(a->message.registered)->text
                                   : std::string("(null registered)");
    case NVTX_MESSAGE_UNKNOWN: return "(none)";
    default: return "(unsupported message type)";
  }
}

std::string color_of(const nvtxEventAttributes_t* a) {
  if (a->colorType != NVTX_COLOR_ARGB) return "none";
  char text[16];
  std::snprintf(text, sizeof text, "%08" PRIX32, a->color);
  return text;
}

std::size_t type_size(std::uint64_t type) {
  if (type_info != nullptr && type > 0 && type < type_info_count) return type_info[type].size;
  return 0;
}

// One payload, decoded entry by entry from its schema.
std::string decode(const nvtxPayloadData_t& data) {
  const fake_schema* schema = nullptr;
  for (const fake_schema& s : schemas)
    if (s.id == data.schemaId) schema = &s;
  if (schema == nullptr) return "(unknown schema " + std::to_string(data.schemaId) + ")";
  if (schema->static_size != 0 && data.size != schema->static_size)
    return "(size " + std::to_string(data.size) + " differs from the schema's " + std::to_string(schema->static_size) + ")";
  const auto* base = static_cast<const unsigned char*>(data.payload);
  std::string text;
  for (const fake_schema_entry& e : schema->entries) {
    if (!text.empty()) text += ';';
    text += e.name + '=';
    const bool is_string = e.type == NVTX_PAYLOAD_ENTRY_TYPE_CSTRING || e.type == NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF8;
    const std::size_t size = is_string && e.flags == 0 ? static_cast<std::size_t>(e.array_length) : type_size(e.type);
    if (size == 0 || e.offset + size > data.size) {
      text += "(out of bounds)";
      continue;
    }
    const unsigned char* at = base + e.offset;
    if (e.type == NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE) {
      double v;
      std::memcpy(&v, at, sizeof v);
      char number[64];
      std::snprintf(number, sizeof number, "%.17g", v);
      text += number;
    } else if (is_string) {
      const void* end = std::memchr(at, 0, size);
      text.append(reinterpret_cast<const char*>(at), end ? static_cast<std::size_t>(static_cast<const unsigned char*>(end) - at) : size);
      if (end == nullptr) text += "(no NUL)";
    } else {
      text += "(type " + std::to_string(e.type) + ")";
    }
  }
  return text;
}

std::string payload_of(const nvtxEventAttributes_t* a) {
  if (a->payloadType == NVTX_PAYLOAD_UNKNOWN) return "none";
  if (a->payloadType != NVTX_PAYLOAD_TYPE_EXT) return "(core payload type " + std::to_string(a->payloadType) + ")";
  const auto* data = reinterpret_cast<const nvtxPayloadData_t*>(static_cast<std::uintptr_t>(a->payload.ullValue));
  std::string text;
  for (std::int32_t i = 0; i < a->reserved0; ++i) {
    if (i) text += " | ";
    text += decode(data[i]);
  }
  return text;
}

void event(const char* kind, nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  std::lock_guard<std::mutex> lock(mutex);
  if (a == nullptr) {
    write_line(std::string(kind) + '\t' + domain_name(domain) + "\t(null attributes)");
    return;
  }
  write_line(std::string(kind) + '\t' + domain_name(domain) + '\t' + std::to_string(a->category) + '\t' + color_of(a) +
             '\t' + message_of(a) + '\t' + payload_of(a));
}

// ---- the core calls ------------------------------------------------------------------

nvtxDomainHandle_t NVTX_API domain_create(const char* name) {
  std::lock_guard<std::mutex> lock(mutex);
  domains.push_back(fake_domain{name ? name : "(null)"});
  write_line("domain\t" + domains.back().name);
  return reinterpret_cast<nvtxDomainHandle_t>(&domains.back());
}

void NVTX_API domain_destroy(nvtxDomainHandle_t) {}

void NVTX_API name_category(nvtxDomainHandle_t domain, std::uint32_t id, const char* name) {
  std::lock_guard<std::mutex> lock(mutex);
  write_line("category\t" + domain_name(domain) + '\t' + std::to_string(id) + '\t' + (name ? name : "(null)"));
}

nvtxStringHandle_t NVTX_API register_string(nvtxDomainHandle_t domain, const char* text) {
  std::lock_guard<std::mutex> lock(mutex);
  strings.push_back(fake_string{text ? text : "(null)"});
  write_line("register\t" + domain_name(domain) + '\t' + strings.back().text);
  return reinterpret_cast<nvtxStringHandle_t>(&strings.back());
}

int NVTX_API range_push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  event("push", domain, a);
  return 0;
}

int NVTX_API range_pop(nvtxDomainHandle_t domain) {
  std::lock_guard<std::mutex> lock(mutex);
  write_line("pop\t" + domain_name(domain));
  return 0;
}

nvtxRangeId_t NVTX_API range_start(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  event("start", domain, a);
  static std::uint64_t next = 0;
  std::lock_guard<std::mutex> lock(mutex);
  return ++next;
}

void NVTX_API range_end(nvtxDomainHandle_t domain, nvtxRangeId_t) {
  std::lock_guard<std::mutex> lock(mutex);
  write_line("end\t" + domain_name(domain));
}

void NVTX_API mark(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) { event("mark", domain, a); }

// ---- the payload extension -------------------------------------------------------------

std::uint64_t NVTX_API schema_register(nvtxDomainHandle_t domain, const nvtxPayloadSchemaAttr_t* attr) {
  std::lock_guard<std::mutex> lock(mutex);
  fake_schema schema;
  schema.id = NVTX_PAYLOAD_SCHEMA_ID_DYNAMIC_START + schemas.size();
  if (attr->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME) schema.name = attr->name ? attr->name : "";
  if (attr->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE) schema.static_size = attr->payloadStaticSize;
  std::string listed;
  std::uint64_t natural_end = 0;
  for (std::size_t i = 0; i < attr->numEntries; ++i) {
    const nvtxPayloadSchemaEntry_t& in = attr->entries[i];
    fake_schema_entry e;
    e.name = in.name ? in.name : "";
    e.type = in.type;
    e.flags = in.flags;
    e.array_length = in.arrayOrUnionDetail;
    // An offset of 0 after the first entry means "the natural place" (the header's rule).
    e.offset = (i == 0 || in.offset != 0) ? in.offset : natural_end;
    const bool is_string = e.type == NVTX_PAYLOAD_ENTRY_TYPE_CSTRING || e.type == NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF8;
    const std::size_t size = is_string && e.flags == 0 ? static_cast<std::size_t>(e.array_length) : type_size(e.type);
    natural_end = e.offset + size;
    if (!listed.empty()) listed += ',';
    listed += e.name + ':' + std::to_string(e.type) + ':' + std::to_string(e.offset) + ':' + std::to_string(size);
    schema.entries.push_back(e);
  }
  write_line("schema\t" + domain_name(domain) + '\t' + schema.name + '\t' + listed + '\t' +
             std::to_string(schema.static_size));
  schemas.push_back(schema);
  return schema.id;
}

std::uint8_t NVTX_API domain_is_enabled(nvtxDomainHandle_t) { return 1; }

template <class F>
void set_slot(NvtxFunctionTable table, unsigned int size, unsigned int id, F* function) {
  if (id <= size && table[id] != nullptr) *table[id] = reinterpret_cast<NvtxFunctionPointer>(function);
}

}  // namespace

extern "C" {

// What NVTX calls when it loads this library for its core API.
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  if (const char* path = std::getenv("KSCOPE_FAKE_NVTX_LOG")) out = std::fopen(path, "w");
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks)) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || table == nullptr) return 0;
  set_slot(table, size, NVTX_CBID_CORE2_DomainCreateA, &domain_create);
  set_slot(table, size, NVTX_CBID_CORE2_DomainDestroy, &domain_destroy);
  set_slot(table, size, NVTX_CBID_CORE2_DomainNameCategoryA, &name_category);
  set_slot(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, &register_string);
  set_slot(table, size, NVTX_CBID_CORE2_DomainRangePushEx, &range_push);
  set_slot(table, size, NVTX_CBID_CORE2_DomainRangePop, &range_pop);
  set_slot(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, &range_start);
  set_slot(table, size, NVTX_CBID_CORE2_DomainRangeEnd, &range_end);
  set_slot(table, size, NVTX_CBID_CORE2_DomainMarkEx, &mark);
  return 1;
}

// What NVTX calls for each extension module (the payload extension is module 2) the first
// time the program uses one.
__attribute__((visibility("default"))) int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t* info) {
  std::lock_guard<std::mutex> lock(mutex);
  if (std::getenv("KSCOPE_FAKE_NVTX_NO_PAYLOAD") != nullptr) {
    write_line("extension\t" + std::to_string(info->moduleId) + "\trefused");
    return 0;  // NVTX then leaves every slot of the module empty
  }
  if (info->moduleId != NVTX_EXT_PAYLOAD_MODULEID || info->segmentsCount < 1) return 1;
  type_info = static_cast<const nvtxPayloadEntryTypeInfo_t*>(info->extInfo);
  type_info_count = type_info ? type_info[0].size : 0;  // the first entry holds the array's length
  nvtxExtModuleSegment_t& segment = info->segments[0];
  if (segment.slotCount > NVTX3EXT_CBID_nvtxDomainIsEnabled) {
    segment.functionSlots[NVTX3EXT_CBID_nvtxPayloadSchemaRegister] = reinterpret_cast<std::intptr_t>(&schema_register);
    segment.functionSlots[NVTX3EXT_CBID_nvtxDomainIsEnabled] = reinterpret_cast<std::intptr_t>(&domain_is_enabled);
  }
  write_line("extension\t" + std::to_string(info->moduleId) + "\tpayload");
  return 1;
}

}  // extern "C"
