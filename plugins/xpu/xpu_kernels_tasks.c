/* xpu_kernels_tasks.c: how the XPU kernels cut their work into tasks for the helper-thread
 * pool (xpu_kernels_pool.c).
 *
 * Holds:
 *   xpu_task_count         how many tasks of about `grain` items (one below 2 * grain),
 *                          whatever the number of threads
 *   xpu_task_range         task t's [begin, end) of an even split
 *   xpu_parallel_elements  runs an element-wise kernel's range function over [0, count): one
 *                          call below XPU_ELEMENTWISE_SPLIT elements, else an even number of
 *                          tasks of at least XPU_PARALLEL_GRAIN elements
 */
#include "xpu_kernels.h"

int64_t xpu_task_count(int64_t count, int64_t grain) {
  if (grain < 1) grain = 1;
  if (count < 2 * grain) return 1;
  int64_t tasks = count / grain;
  return tasks > 4096 ? 4096 : tasks;
}

/* The task count of xpu_parallel_elements over `count` elements. */
static int64_t elementwise_tasks(int64_t count) {
  if (count < xpu_pool_elementwise_split() || count < 2 * XPU_PARALLEL_GRAIN) return 1;
  /* An even number of tasks (two threads share them evenly) of at least XPU_PARALLEL_GRAIN
   * elements each. */
  int64_t pairs = count / (2 * XPU_PARALLEL_GRAIN);
  return pairs > 2048 ? 4096 : 2 * pairs;
}

/* An xpu_parallel_elements call as its pool tasks see it. */
typedef struct ElementsJob {
  void (*range)(void* ctx, int64_t begin, int64_t end);
  void* ctx;
  int64_t count, tasks;
} ElementsJob;

static void elements_task(void* arg, int64_t t) {
  const ElementsJob* job = arg;
  int64_t begin, end;
  xpu_task_range(job->count, job->tasks, t, &begin, &end);
  job->range(job->ctx, begin, end);
}

void xpu_parallel_elements(int64_t count, void (*range)(void* ctx, int64_t begin, int64_t end),
                           void* ctx) {
  ElementsJob job = {.range = range, .ctx = ctx, .count = count,
                     .tasks = elementwise_tasks(count)};
  xpu_parallel_for(job.tasks, elements_task, &job);
}

void xpu_task_range(int64_t count, int64_t tasks, int64_t t, int64_t* begin, int64_t* end) {
  /* Even split; the arithmetic avoids overflow for any count below 2^62. */
  int64_t q = count / tasks, r = count % tasks;
  *begin = t * q + (t < r ? t : r);
  *end = *begin + q + (t < r ? 1 : 0);
}
