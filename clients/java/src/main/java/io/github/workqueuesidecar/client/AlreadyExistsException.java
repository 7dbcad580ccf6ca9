package io.github.workqueuesidecar.client;

/**
 * ABORTED with the API server's reason {@code AlreadyExists}: a create found an object of that
 * name. A {@link ConflictException} too, as the API server's other conflicts.
 */
public class AlreadyExistsException extends ConflictException {
  private static final long serialVersionUID = 1L;

  public AlreadyExistsException(String message, ErrorDetails details, Throwable cause) {
    super(message, details, cause);
  }
}
