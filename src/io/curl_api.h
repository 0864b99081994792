// libcurl, loaded on first use. The library does not link libcurl: a process that never opens a URL
// never loads it and its dependency tree (TLS, Kerberos, LDAP, ...), which otherwise costs every start
// of the CLI about 10 ms of loading and relocation. Internal; only http_source.cpp includes it.
#pragma once

#include <curl/curl.h>

namespace safeweights::curl {

// The few libcurl functions the HTTP source calls, resolved together from one dlopen().
struct Api {
  CURLcode (*global_init)(long flags);
  CURL* (*easy_init)();
  void (*easy_cleanup)(CURL*);
  void (*easy_reset)(CURL*);
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  CURLcode (*easy_perform)(CURL*);
  const char* (*easy_strerror)(CURLcode);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
  CURLU* (*url)();
  void (*url_cleanup)(CURLU*);
  CURLUcode (*url_set)(CURLU*, CURLUPart, const char*, unsigned int);
  CURLUcode (*url_get)(const CURLU*, CURLUPart, char**, unsigned int);
  void (*free)(void*);  // curl_free
};

// The table, loaded and curl_global_init()-ed once per process (thread-safe); nullptr when libcurl
// cannot be loaded or lacks a function, and then `why` (if given) says what failed.
const Api* api(const char** why = nullptr) noexcept;

}  // namespace safeweights::curl
