package io.github.workqueuesidecar.client;

import java.util.Map;

/**
 * A queue's counts at one instant (Len).
 *
 * @param ready keys ready to be handed out now (client-go's Len)
 * @param waiting keys waiting for a delay
 * @param held keys held by workers
 * @param dirty held keys added again while held
 * @param readyByPriority ready keys per priority, highest priority first
 * @param settling keys whose lease ended after writes the caches have not all seen yet (SETTLING)
 */
public record Counts(int ready, int waiting, int held, int dirty, Map<Integer, Integer> readyByPriority, int settling) {}
