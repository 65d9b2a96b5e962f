/* embedded.h: files compiled into the binary by scripts/embed.cmake (the web
 * page, the LLM prompt templates, docs/context notes), looked up by their path
 * relative to the source tree, e.g. "src/llm/prompts/diff.md". */
#ifndef CUCO_EMBEDDED_H
#define CUCO_EMBEDDED_H

#include <stddef.h>

/* Returns the bytes (NUL-terminated, static, never freed) and sets *size
 * (without the NUL); NULL if no such file was embedded. */
const unsigned char *cuco_embedded_find(const char *path, size_t *size);

#endif
