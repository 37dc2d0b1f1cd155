/* NVIDIA's side of a GPU timeline: an injection library for libcuda
 * (CUDA_INJECTION64_PATH) that records, through CUPTI's activity API, every
 * kernel's start and end on the GPU, every copy and fill, and the
 * runtime calls of the process, and writes them at exit as Chrome
 * trace-event JSON in the layout MACUDA_PROFILE writes for ours (a GPU
 * process 1 with kernels on thread 1 and copies on thread 2, a host process
 * 2 with each caller thread's runtime calls by name), so
 * tests/llama/anatomy.py reads the two the same way and sets a decode
 * token of stock beside ours.
 *
 *   gcc -shared -fPIC -O2 -I CUDA_INCLUDE -I CUPTI_INCLUDE cupti_trace.c \
 *       -L CUPTI_LIB -lcupti -o libcupti_trace.so
 *   CUDA_INJECTION64_PATH=$PWD/libcupti_trace.so MACUDA_CUPTI_TRACE=out.json prog
 *
 * Kernels keep their mangled names (anatomy.py groups them by family);
 * a runtime call is named without CUPTI's version suffix (cudaGraphLaunch,
 * not cudaGraphLaunch_v10000), as ours are. The tracer costs the traced
 * program something; a run with and without it says how much. */
#include <cupti.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUFFER_BYTES (8u << 20)
#define ALIGN 8

enum what { KERNEL, COPY, FILL, CALL };

struct event {
  enum what what;
  uint64_t start, end;
  uint32_t stream, correlation, thread, graph;
  int32_t grid[3], block[3];
  uint64_t bytes;
  char *name;
};

static struct event *events;
static size_t count, capacity;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t threads[256];
static size_t thread_count;

static void note(struct event e) {
  pthread_mutex_lock(&lock);
  if (count == capacity) {
    size_t grown = capacity ? capacity * 2 : 1u << 16;
    struct event *more = realloc(events, grown * sizeof *more);
    if (!more) {
      pthread_mutex_unlock(&lock);
      free(e.name);
      return;
    }
    events = more;
    capacity = grown;
  }
  events[count++] = e;
  pthread_mutex_unlock(&lock);
}

/* Small numbers for OS thread ids, in the order they first called. */
static uint32_t thread_index(uint32_t os_thread) {
  for (size_t i = 0; i < thread_count; i++)
    if (threads[i] == os_thread) return (uint32_t)i;
  if (thread_count < sizeof threads / sizeof threads[0]) threads[thread_count++] = os_thread;
  return (uint32_t)(thread_count - 1);
}

static char *call_name(CUpti_CallbackId cbid) {
  const char *name = NULL;
  if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) != CUPTI_SUCCESS || !name)
    return strdup("?");
  char *own = strdup(name);
  char *v = own ? strstr(own, "_v") : NULL;
  if (v) *v = 0;
  return own;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(ALIGN, BUFFER_BYTES);
  *size = *buffer ? BUFFER_BYTES : 0;
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
  (void)ctx;
  (void)stream;
  (void)size;
  CUpti_Activity *r = NULL;
  while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    struct event e = {0};
    switch (r->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const void *)r;
        e.what = KERNEL;
        e.start = k->start;
        e.end = k->end;
        e.stream = k->streamId;
        e.correlation = k->correlationId;
        e.graph = k->graphId;
        e.grid[0] = k->gridX, e.grid[1] = k->gridY, e.grid[2] = k->gridZ;
        e.block[0] = k->blockX, e.block[1] = k->blockY, e.block[2] = k->blockZ;
        e.name = strdup(k->name ? k->name : "?");
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const void *)r;
        e.what = COPY;
        e.start = m->start;
        e.end = m->end;
        e.stream = m->streamId;
        e.bytes = m->bytes;
        e.correlation = m->correlationId;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const void *)r;
        e.what = FILL;
        e.start = m->start;
        e.end = m->end;
        e.stream = m->streamId;
        e.bytes = m->bytes;
        e.correlation = m->correlationId;
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME: {
        const CUpti_ActivityAPI *a = (const void *)r;
        e.what = CALL;
        e.start = a->start;
        e.end = a->end;
        e.correlation = a->correlationId;
        e.thread = a->threadId;
        e.name = call_name(a->cbid);
        break;
      }
      default:
        continue;
    }
    note(e);
  }
  free(buffer);
}

/* A JSON string of a name: quotes and backslashes escaped, control bytes
 * dropped. */
static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s >= 0x20) fputc(*s, f);
  }
  fputc('"', f);
}

static void write_trace(void) {
  cuptiActivityFlushAll(1);
  const char *path = getenv("MACUDA_CUPTI_TRACE");
  if (!path || !*path) return;
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "cupti_trace: cannot write %s\n", path);
    return;
  }
  pthread_mutex_lock(&lock);
  uint64_t base = UINT64_MAX;
  for (size_t i = 0; i < count; i++)
    if (events[i].start && events[i].start < base) base = events[i].start;
  fprintf(f, "{\"traceEvents\": [\n");
  fprintf(f, "{\"ph\": \"M\", \"pid\": 1, \"name\": \"process_name\", \"args\": {\"name\": \"GPU (stock, CUPTI)\"}},\n");
  fprintf(f, "{\"ph\": \"M\", \"pid\": 2, \"name\": \"process_name\", \"args\": {\"name\": \"host\"}}");
  size_t kernels = 0;
  for (size_t i = 0; i < count; i++) {
    const struct event *e = &events[i];
    double ts = (double)(e->start - base) / 1000.0;
    double dur = e->end > e->start ? (double)(e->end - e->start) / 1000.0 : 0.0;
    fprintf(f, ",\n{\"ph\": \"X\", ");
    switch (e->what) {
      case KERNEL:
        kernels++;
        fprintf(f, "\"pid\": 1, \"tid\": 1, \"name\": ");
        json_string(f, e->name);
        fprintf(f,
                ", \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"mangled\": ", ts, dur);
        json_string(f, e->name);
        fprintf(f,
                ", \"grid\": [%d, %d, %d], \"block\": [%d, %d, %d], \"stream\": %u, "
                "\"graph\": %u, \"serial\": %u}}",
                e->grid[0], e->grid[1], e->grid[2], e->block[0], e->block[1], e->block[2],
                e->stream, e->graph, e->correlation);
        break;
      case COPY:
      case FILL:
        fprintf(f,
                "\"pid\": 1, \"tid\": 2, \"name\": \"%s\", \"ts\": %.3f, \"dur\": %.3f, "
                "\"args\": {\"bytes\": %llu, \"stream\": %u}}",
                e->what == COPY ? "copy" : "fill", ts, dur, (unsigned long long)e->bytes,
                e->stream);
        break;
      case CALL:
        fprintf(f, "\"pid\": 2, \"tid\": %u, \"name\": ", 200 + thread_index(e->thread));
        json_string(f, e->name);
        fprintf(f, ", \"ts\": %.3f, \"dur\": %.3f}", ts, dur);
        break;
    }
  }
  fprintf(f, "\n], \"otherData\": {\"source\": \"CUPTI\", \"kernels\": %zu}}\n", kernels);
  pthread_mutex_unlock(&lock);
  fclose(f);
  fprintf(stderr, "cupti_trace: %zu kernels, %zu events in %s\n", kernels, count, path);
}

/* libcuda calls this once, when it initialises, for the library named by
 * CUDA_INJECTION64_PATH. */
int InitializeInjection(void) {
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
    fprintf(stderr, "cupti_trace: CUPTI refused the buffer callbacks\n");
    return 0;
  }
  CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (cuptiActivityEnable(kinds[i]) != CUPTI_SUCCESS)
      fprintf(stderr, "cupti_trace: activity kind %d not enabled\n", (int)kinds[i]);
  atexit(write_trace);
  return 1;
}
